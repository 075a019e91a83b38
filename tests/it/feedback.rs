//! Feedback through `POST /mcp/feedback` and the `submit_feedback` tool.

use serde_json::{Value, json};

use crate::support::{OrcaSetup, TestDatabase, call, meta_of};

async fn post(url: &str, body: &str) -> (u16, Value) {
    let response = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn feedback_is_stored_and_a_second_submission_replaces_the_first() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let client = server.client(None).await;
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    let meta = meta_of(&result);
    let token = meta["feedback_token"].as_str().unwrap().to_owned();
    client.cancel().await.unwrap();
    let url = server.url("/mcp/feedback");

    // Posted right after the call: the execution may still be on its way to the database.
    let (status, first) = post(
        &url,
        &json!({"feedback_token": token, "rating": "up", "rating_score": 4, "comment": "spot on"})
            .to_string(),
    )
    .await;
    assert_eq!(status, 201, "{first}");
    assert_eq!(first["rating"], "up");
    assert_eq!(first["rating_score"], 4);
    assert_eq!(first["comment"], "spot on");
    assert_eq!(first["execution_id"], meta["execution_id"]);
    assert_eq!(first["updated_at"], Value::Null);

    let (status, second) =
        post(&url, &json!({"feedback_token": token, "rating": "down"}).to_string()).await;
    assert_eq!(status, 201);
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second["created_at"], first["created_at"], "created_at is kept");
    assert!(second["updated_at"].is_string(), "updated_at is set");
    assert_eq!(second["rating"], "down");
    assert_eq!(second["rating_score"], Value::Null);

    let pool = database.connect().await;
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM orca.mcp_feedback")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 1);
}

#[tokio::test]
async fn bad_feedback_bodies_are_422_and_unknown_tokens_404() {
    let database = TestDatabase::create().await;
    let setup = OrcaSetup::new(&database.url);
    let server = setup.http_server(&[]);
    let url = server.url("/mcp/feedback");
    let token = uuid::Uuid::new_v4().to_string();
    let cases: Vec<(String, u16, &str)> = vec![
        ("not json".to_owned(), 422, "not valid JSON"),
        ("[1]".to_owned(), 422, "JSON object"),
        (json!({"rating": "up"}).to_string(), 422, "`feedback_token` is required"),
        (json!({"feedback_token": "abc", "rating": "up"}).to_string(), 422, "must be a UUID"),
        (
            json!({"feedback_token": token, "rating": "great"}).to_string(),
            422,
            "\"up\" or \"down\"",
        ),
        (
            json!({"feedback_token": token, "rating": "up", "rating_score": 0}).to_string(),
            422,
            "from 1 to 5",
        ),
        (
            json!({"feedback_token": token, "rating": "up", "rating_score": "5"}).to_string(),
            422,
            "from 1 to 5",
        ),
        (
            json!({"feedback_token": token, "rating": "up", "extra": 1}).to_string(),
            422,
            "unknown field `extra`",
        ),
        (
            json!({"feedback_token": token, "rating": "up"}).to_string(),
            404,
            "no execution has this feedback token",
        ),
    ];
    for (body, expected_status, expected_message) in cases {
        let (status, response) = post(&url, &body).await;
        assert_eq!(status, expected_status, "{body} -> {response}");
        let message = response["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(expected_message),
            "{body}: {message:?} lacks {expected_message:?}"
        );
        assert!(response["error"]["trace_id"].is_string());
    }
}

#[tokio::test]
async fn the_submit_feedback_tool_follows_the_same_contract() {
    let database = TestDatabase::create().await;
    let client = OrcaSetup::new(&database.url).stdio_client().await;
    let result = call(&client, "list_servers", json!({}), None).await.unwrap();
    let token = meta_of(&result)["feedback_token"].clone();
    let rated = call(
        &client,
        "submit_feedback",
        json!({"feedback_token": token, "rating": "down", "comment": "wrong table"}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(rated.is_error, Some(false));
    let feedback = &rated.structured_content.clone().unwrap()["feedback"];
    assert_eq!(feedback["rating"], "down");
    assert_eq!(feedback["comment"], "wrong table");
    assert_eq!(feedback["user_id"], "local");

    let unknown = call(
        &client,
        "submit_feedback",
        json!({"feedback_token": uuid::Uuid::new_v4(), "rating": "up"}),
        None,
    )
    .await
    .unwrap();
    assert_eq!(unknown.is_error, Some(true));
    assert_eq!(unknown.structured_content.clone().unwrap()["error"]["code"], "NOT_FOUND");
    let invalid =
        call(&client, "submit_feedback", json!({"feedback_token": token, "rating": "meh"}), None)
            .await
            .unwrap();
    assert_eq!(invalid.structured_content.clone().unwrap()["error"]["code"], "INVALID_INPUT");
    client.cancel().await.unwrap();
}
