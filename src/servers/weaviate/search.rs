//! The one seam between the search tools and Weaviate's query API. Tools describe a search or an
//! aggregation as typed values; this module turns them into a request and the answer into
//! hits. Today that is GraphQL (`graphql.rs`); Weaviate's REST search API
//! (`/v1/search/{collection}/hybrid`, experimental today) can replace it here without touching
//! the tools.

use serde_json::Value;

use super::client::{Error, WeaviateClient};
use super::filter::Filter;
use super::graphql::{self, AggregateField, Field, Hit, Input, Name};

/// The metadata a search may return, as Weaviate names it in `_additional`.
pub(crate) const METADATA: [&str; 8] = [
    "id",
    "vector",
    "distance",
    "score",
    "explainScore",
    "creationTimeUnix",
    "lastUpdateTimeUnix",
    "certainty",
];

/// How objects are found.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum SearchKind {
    /// Keyword and vector search fused; `alpha` 0 is pure BM25, 1 pure vector.
    Hybrid {
        query: String,
        alpha: f64,
        target_vectors: Vec<Name>,
        properties: Vec<Name>,
    },
    NearText {
        concepts: Vec<String>,
        distance: Option<f64>,
        certainty: Option<f64>,
        target_vectors: Vec<Name>,
    },
    NearVector {
        vector: Vec<f32>,
        distance: Option<f64>,
        certainty: Option<f64>,
        target_vectors: Vec<Name>,
    },
    Bm25 {
        query: String,
        properties: Vec<Name>,
    },
}

/// A checked search request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Search {
    pub(crate) collection: Name,
    pub(crate) tenant: Option<String>,
    pub(crate) kind: SearchKind,
    pub(crate) filter: Option<Filter>,
    pub(crate) limit: u32,
    pub(crate) fields: Vec<Field>,
    /// Entries of [`METADATA`].
    pub(crate) metadata: Vec<&'static str>,
}

/// A checked aggregation request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Aggregation {
    pub(crate) collection: Name,
    pub(crate) tenant: Option<String>,
    pub(crate) filter: Option<Filter>,
    pub(crate) fields: Vec<AggregateField>,
}

fn vector_arguments(
    mut fields: Vec<(&'static str, Input)>,
    distance: Option<f64>,
    certainty: Option<f64>,
    target_vectors: &[Name],
) -> Input {
    if let Some(distance) = distance {
        fields.push(("distance", Input::Float(distance)));
    }
    if let Some(certainty) = certainty {
        fields.push(("certainty", Input::Float(certainty)));
    }
    if !target_vectors.is_empty() {
        fields.push(("targetVectors", Input::names(target_vectors)));
    }
    Input::Object(fields)
}

/// The GraphQL text of a search (public to the crate for tests and the benchmark).
pub(crate) fn search_query(search: &Search) -> String {
    let mut arguments = Vec::new();
    match &search.kind {
        SearchKind::Hybrid { query, alpha, target_vectors, properties } => {
            let mut fields =
                vec![("query", Input::String(query.clone())), ("alpha", Input::Float(*alpha))];
            if !properties.is_empty() {
                fields.push(("properties", Input::names(properties)));
            }
            if !target_vectors.is_empty() {
                fields.push(("targetVectors", Input::names(target_vectors)));
            }
            arguments.push(("hybrid", Input::Object(fields)));
        }
        SearchKind::NearText { concepts, distance, certainty, target_vectors } => {
            let fields = vec![("concepts", Input::strings(concepts))];
            arguments.push((
                "nearText",
                vector_arguments(fields, *distance, *certainty, target_vectors),
            ));
        }
        SearchKind::NearVector { vector, distance, certainty, target_vectors } => {
            let values = vector.iter().map(|value| Input::Float(f64::from(*value))).collect();
            let fields = vec![("vector", Input::List(values))];
            arguments.push((
                "nearVector",
                vector_arguments(fields, *distance, *certainty, target_vectors),
            ));
        }
        SearchKind::Bm25 { query, properties } => {
            let mut fields = vec![("query", Input::String(query.clone()))];
            if !properties.is_empty() {
                fields.push(("properties", Input::names(properties)));
            }
            arguments.push(("bm25", Input::Object(fields)));
        }
    }
    if let Some(filter) = &search.filter {
        arguments.push(("where", filter.to_input()));
    }
    arguments.push(("limit", Input::Int(i64::from(search.limit))));
    if let Some(tenant) = &search.tenant {
        arguments.push(("tenant", Input::String(tenant.clone())));
    }
    let mut additional = vec!["id"];
    additional.extend(search.metadata.iter().filter(|name| **name != "id"));
    graphql::get_query(&search.collection, &arguments, &search.fields, &additional)
}

/// Run a search.
///
/// # Errors
///
/// Weaviate's refusal (HTTP or GraphQL) or an unreachable Weaviate.
pub(crate) async fn search(client: &WeaviateClient, search: &Search) -> Result<Vec<Hit>, Error> {
    let data = client.graphql(&search_query(search)).await?;
    graphql::read_hits(&data, &search.collection, &search.metadata).map_err(Error::Malformed)
}

/// The GraphQL text of an aggregation.
pub(crate) fn aggregate_query(aggregation: &Aggregation) -> String {
    let mut arguments = Vec::new();
    if let Some(filter) = &aggregation.filter {
        arguments.push(("where", filter.to_input()));
    }
    if let Some(tenant) = &aggregation.tenant {
        arguments.push(("tenant", Input::String(tenant.clone())));
    }
    graphql::aggregate_query(&aggregation.collection, &arguments, &aggregation.fields)
}

/// Run an aggregation: `{count, properties: {name: metrics}}`.
///
/// # Errors
///
/// Weaviate's refusal (HTTP or GraphQL) or an unreachable Weaviate.
pub(crate) async fn aggregate(
    client: &WeaviateClient,
    aggregation: &Aggregation,
) -> Result<Value, Error> {
    let data = client.graphql(&aggregate_query(aggregation)).await?;
    graphql::read_aggregate(&data, &aggregation.collection).map_err(Error::Malformed)
}
