//! The sample databases of the SQL tests, each created once per test run as a template and
//! copied for every test (`CREATE DATABASE .. TEMPLATE`, far faster than loading): Chinook with
//! its data, and the Pagila schema (adapted to PostgreSQL 15: no pgvector, no `uuidv7()`, stored
//! instead of virtual generated columns).

use sqlx::Connection;

use super::pg::{TestDatabase, admin_url, replace_database};

const CHINOOK_SQL: &str = include_str!("../../../data/chinook/chinook_postgres.sql");
const PAGILA_SQL: &str = include_str!("../../data/pagila/pagila_schema.sql");

/// A fresh copy of Chinook.
pub(crate) async fn chinook() -> TestDatabase {
    copy_of("sample_chinook", load_chinook).await
}

/// A fresh copy of the Pagila schema.
pub(crate) async fn pagila() -> TestDatabase {
    copy_of("sample_pagila", load_pagila).await
}

async fn copy_of(
    template: &'static str,
    load: fn(String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) -> TestDatabase {
    let admin = admin_url();
    let mut connection = sqlx::PgConnection::connect(&admin).await.expect("test server");
    // Serialize template creation across the test processes of this run.
    sqlx::query("SELECT pg_advisory_lock(hashtext($1))")
        .bind(template)
        .execute(&mut connection)
        .await
        .unwrap();
    let exists: Option<(i32,)> = sqlx::query_as("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(template)
        .fetch_optional(&mut connection)
        .await
        .unwrap();
    if exists.is_none() {
        let staging = format!("{template}_loading");
        for statement in
            [format!("DROP DATABASE IF EXISTS {staging}"), format!("CREATE DATABASE {staging}")]
        {
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement)).execute(&mut connection).await.unwrap();
        }
        load(replace_database(&admin, &staging)).await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "ALTER DATABASE {staging} RENAME TO {template}"
        )))
        .execute(&mut connection)
        .await
        .unwrap();
    }
    let name = format!("t_{}", uuid::Uuid::new_v4().simple());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE \"{name}\" TEMPLATE {template}")))
        .execute(&mut connection)
        .await
        .unwrap();
    sqlx::query("SELECT pg_advisory_unlock(hashtext($1))")
        .bind(template)
        .execute(&mut connection)
        .await
        .unwrap();
    connection.close().await.unwrap();
    TestDatabase { url: replace_database(&admin, &name) }
}

fn load_chinook(url: String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        let marker = "\\c chinook;";
        let body = &CHINOOK_SQL[CHINOOK_SQL.find(marker).expect("chinook marker") + marker.len()..];
        let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
        sqlx::raw_sql(sqlx::AssertSqlSafe(body)).execute(&mut connection).await.unwrap();
        connection.close().await.unwrap();
    })
}

fn load_pagila(url: String) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> {
    Box::pin(async move {
        let adapted = PAGILA_SQL
            .replace("uuidv7()", "gen_random_uuid()")
            .replace(") VIRTUAL\n", ") STORED\n");
        let statements = orca::sql::classify(&adapted).expect("pagila parses").statements;
        let mut connection = sqlx::PgConnection::connect(&url).await.unwrap();
        for statement in statements {
            // pgvector is not installed here: leave out the extension and what uses it.
            let lower = statement.text.to_ascii_lowercase();
            if lower.contains("vector(")
                || lower.contains("extension vector")
                || lower.contains("exists vector")
                || lower.contains("vector_cosine_ops")
                || lower.contains("film_embedding")
            {
                continue;
            }
            sqlx::raw_sql(sqlx::AssertSqlSafe(statement.text.clone()))
                .execute(&mut connection)
                .await
                .unwrap_or_else(|error| panic!("pagila: {error}: {}", statement.text));
        }
        connection.close().await.unwrap();
    })
}
