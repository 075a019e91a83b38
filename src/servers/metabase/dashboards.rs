//! Dashboard cards across Metabase versions. Before 0.47 a card is added with
//! `POST /api/dashboard/:id/cards`; 0.47 replaces the whole list with
//! `PUT /api/dashboard/:id/cards` (`cards`, `ordered_tabs`); from 0.48 `PUT /api/dashboard/:id`
//! takes `dashcards` and `tabs`. In both replacing forms a dashcard left out is deleted, so the
//! list sent is always every existing dashcard plus the new ones (negative ids), and every tab,
//! leaving out only the dashcards asked to be removed (before 0.47 those are removed one by one
//! with `DELETE /api/dashboard/:id/cards?dashcardId=`).

use serde_json::{Map, Value, json};

use super::client::Version;

/// The keys of a dashcard that a replacing `PUT` takes (the nested `card` and timestamps are
/// left out; `series` become their ids).
const DASHCARD_KEYS: [&str; 10] = [
    "id",
    "card_id",
    "dashboard_tab_id",
    "action_id",
    "row",
    "col",
    "size_x",
    "size_y",
    "parameter_mappings",
    "visualization_settings",
];

/// The request that replaces a dashboard's cards, by version.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Layout {
    /// 0.47: `PUT /api/dashboard/:id/cards`.
    CardsEndpoint(Value),
    /// 0.48 and later: `PUT /api/dashboard/:id`.
    Dashboard(Value),
}

/// A dashcard as the replacing `PUT` takes it.
pub(crate) fn for_put(dashcard: &Value) -> Value {
    let mut out = Map::new();
    for key in DASHCARD_KEYS {
        if let Some(value) = dashcard.get(key) {
            out.insert(key.to_owned(), value.clone());
        }
    }
    let series: Vec<Value> = dashcard
        .get("series")
        .and_then(Value::as_array)
        .map(|series| {
            series.iter().filter_map(|card| card.get("id")).map(|id| json!({ "id": id })).collect()
        })
        .unwrap_or_default();
    out.insert("series".to_owned(), Value::Array(series));
    out.entry("parameter_mappings").or_insert_with(|| json!([]));
    out.entry("visualization_settings").or_insert_with(|| json!({}));
    Value::Object(out)
}

/// The existing dashcards of a `GET /api/dashboard/:id` answer (`dashcards`, or
/// `ordered_cards` before 0.48).
pub(crate) fn existing(dashboard: &Value) -> Vec<Value> {
    dashboard
        .get("dashcards")
        .or_else(|| dashboard.get("ordered_cards"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default()
}

/// The tabs of a dashboard as the replacing `PUT` takes them.
pub(crate) fn tabs(dashboard: &Value) -> Vec<Value> {
    dashboard
        .get("tabs")
        .or_else(|| dashboard.get("ordered_tabs"))
        .and_then(Value::as_array)
        .map(|tabs| {
            tabs.iter().map(|tab| json!({ "id": tab.get("id"), "name": tab.get("name") })).collect()
        })
        .unwrap_or_default()
}

/// A negative id below every id in `dashcards` (Metabase creates dashcards with negative ids).
pub(crate) fn new_id(dashcards: &[Value]) -> i64 {
    dashcards
        .iter()
        .filter_map(|card| card.get("id").and_then(Value::as_i64))
        .min()
        .unwrap_or(0)
        .min(0)
        - 1
}

/// Every existing dashcard but those whose id is in `removed`, with `changes` applied by id
/// (negative ids are new), and every tab.
pub(crate) fn merged(
    dashboard: &Value,
    changes: &[Value],
    removed: &[i64],
    version: &Version,
) -> Layout {
    let mut dashcards: Vec<Value> = existing(dashboard)
        .iter()
        .filter(|card| {
            card.get("id").and_then(Value::as_i64).is_none_or(|id| !removed.contains(&id))
        })
        .map(for_put)
        .collect();
    for change in changes {
        let id = change.get("id").and_then(Value::as_i64);
        match dashcards
            .iter_mut()
            .find(|card| id.is_some() && card.get("id").and_then(Value::as_i64) == id)
        {
            Some(card) => {
                if let (Some(card), Some(change)) = (card.as_object_mut(), change.as_object()) {
                    for (key, value) in change {
                        card.insert(key.clone(), value.clone());
                    }
                }
            }
            None => dashcards.push(for_put(change)),
        }
    }
    let tabs = tabs(dashboard);
    if version.at_least(48) {
        Layout::Dashboard(json!({ "dashcards": dashcards, "tabs": tabs }))
    } else {
        Layout::CardsEndpoint(json!({ "cards": dashcards, "ordered_tabs": tabs }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dashboard() -> Value {
        json!({"id": 1, "tabs": [{"id": 5, "name": "One", "position": 0}, {"id": 6, "name": "Two", "position": 1}],
               "dashcards": [
                   {"id": 1, "card_id": 1, "dashboard_tab_id": 5, "row": 0, "col": 0, "size_x": 4, "size_y": 4,
                    "series": [{"id": 9, "name": "s"}], "parameter_mappings": [], "visualization_settings": {},
                    "card": {"id": 1, "name": "Question"}, "created_at": "2020-01-01"},
                   {"id": 2, "card_id": 2, "dashboard_tab_id": 6, "row": 0, "col": 0, "size_x": 4, "size_y": 4}]})
    }

    #[test]
    fn a_new_card_keeps_every_card_and_tab_on_each_replacing_version() {
        let new = json!({"id": new_id(&existing(&dashboard())), "card_id": 7, "row": 4, "col": 0, "size_x": 6, "size_y": 3});
        let Layout::Dashboard(body) =
            merged(&dashboard(), std::slice::from_ref(&new), &[], &Version::parse("v0.50.1"))
        else {
            panic!("0.50 replaces through PUT /api/dashboard/:id");
        };
        let ids: Vec<i64> = body["dashcards"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_i64().unwrap())
            .collect();
        assert_eq!(ids, [1, 2, -1]);
        assert_eq!(body["tabs"], json!([{"id": 5, "name": "One"}, {"id": 6, "name": "Two"}]));
        assert_eq!(body["dashcards"][0]["series"], json!([{"id": 9}]));
        assert!(body["dashcards"][0].get("card").is_none());
        let Layout::CardsEndpoint(body) =
            merged(&dashboard(), &[new], &[], &Version::parse("v0.47.2"))
        else {
            panic!("0.47 replaces through PUT /api/dashboard/:id/cards");
        };
        assert_eq!(body["cards"].as_array().unwrap().len(), 3);
        assert_eq!(body["ordered_tabs"].as_array().unwrap().len(), 2);
    }

    #[test]
    fn a_change_by_id_moves_a_card_without_dropping_the_others() {
        let change = json!({"id": 2, "row": 8});
        let Layout::Dashboard(body) =
            merged(&dashboard(), &[change], &[], &Version::parse("v0.49.0"))
        else {
            panic!("0.49 replaces through PUT /api/dashboard/:id");
        };
        assert_eq!(body["dashcards"].as_array().unwrap().len(), 2);
        assert_eq!(body["dashcards"][1]["row"], 8);
        assert_eq!(body["dashcards"][1]["card_id"], 2);
    }

    #[test]
    fn a_removal_leaves_out_only_that_card_and_keeps_every_tab() {
        for version in ["v0.50.1", "v0.47.2"] {
            let (cards, tabs) = match merged(&dashboard(), &[], &[1], &Version::parse(version)) {
                Layout::Dashboard(body) => (body["dashcards"].clone(), body["tabs"].clone()),
                Layout::CardsEndpoint(body) => {
                    (body["cards"].clone(), body["ordered_tabs"].clone())
                }
            };
            let ids: Vec<i64> =
                cards.as_array().unwrap().iter().map(|c| c["id"].as_i64().unwrap()).collect();
            assert_eq!(ids, [2], "{version}");
            assert_eq!(tabs.as_array().unwrap().len(), 2, "{version}");
        }
    }
}
