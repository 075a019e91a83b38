//! Search tools: `weaviate-query-hybrid` (specification 001), `weaviate-query-near-text`,
//! `weaviate-query-near-vector`, `weaviate-query-bm25` and `weaviate-aggregate`. Each checks
//! its arguments, describes the request with `search.rs`'s types and shapes the answer.

use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::filter::Filter;
use super::graphql::{AggregateField, Field, Name};
use super::search::{self, Aggregation, METADATA, Search, SearchKind};
use super::{WeaviateServer, collection_missing, collection_name, names, tenant_name};
use crate::servers::ToolSpec;
use crate::tool::{ToolError, Verb, parse_arguments};

pub(super) const NAMES: [&str; 5] = [
    "weaviate-query-hybrid",
    "weaviate-query-near-text",
    "weaviate-query-near-vector",
    "weaviate-query-bm25",
    "weaviate-aggregate",
];

/// The default `alpha` of a hybrid search, as specification 001 says.
pub(crate) const DEFAULT_ALPHA: f64 = 0.5;
const DEFAULT_LIMIT: u32 = 10;
/// Weaviate's default `QUERY_MAXIMUM_RESULTS`.
const MAX_LIMIT: u32 = 10_000;

/// What every search returns and how it narrows its results.
#[derive(Debug, Default)]
struct Common {
    limit: Option<u32>,
    filters: Option<Filter>,
    return_properties: Option<Vec<String>>,
    return_metadata: Option<Vec<String>>,
}

/// The common arguments of a search parameter type.
macro_rules! common {
    ($params:expr) => {
        Common {
            limit: $params.limit,
            filters: $params.filters,
            return_properties: $params.return_properties,
            return_metadata: $params.return_metadata,
        }
    };
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HybridParams {
    /// The plain-text query to search the collection on.
    query: String,
    /// Name of the collection to search.
    collection_name: String,
    /// Name of the tenant to search within.
    #[serde(alias = "tenant")]
    tenant_name: Option<String>,
    /// Semantic weight: 0.0 is pure keyword (BM25), 1.0 pure vector. Default 0.5.
    alpha: Option<f64>,
    /// Target vectors of the vector search (named vectors).
    target_vectors: Option<Vec<String>>,
    /// Properties of the keyword search; all text properties when omitted.
    target_properties: Option<Vec<String>>,
    /// Maximum number of results to return (default 10).
    limit: Option<u32>,
    /// Only objects matching this filter (Weaviate's `where` shape).
    filters: Option<Filter>,
    /// Properties to return; all of them when omitted.
    return_properties: Option<Vec<String>>,
    /// Metadata to return in `additional`: id, vector, distance, score, explainScore,
    /// creationTimeUnix, lastUpdateTimeUnix, certainty.
    return_metadata: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NearTextParams {
    /// The text whose meaning to search for.
    query: String,
    collection_name: String,
    #[serde(alias = "tenant_name")]
    tenant: Option<String>,
    /// Only results closer than this vector distance.
    distance: Option<f64>,
    /// Only results at least this certain (0 to 1; cosine distance only).
    certainty: Option<f64>,
    target_vectors: Option<Vec<String>>,
    /// Maximum number of results to return (default 10).
    limit: Option<u32>,
    /// Only objects matching this filter (Weaviate's `where` shape).
    filters: Option<Filter>,
    /// Properties to return; all of them when omitted.
    return_properties: Option<Vec<String>>,
    /// Metadata to return in `additional`: id, vector, distance, score, explainScore,
    /// creationTimeUnix, lastUpdateTimeUnix, certainty.
    return_metadata: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NearVectorParams {
    /// The query vector.
    vector: Vec<f32>,
    collection_name: String,
    #[serde(alias = "tenant_name")]
    tenant: Option<String>,
    distance: Option<f64>,
    certainty: Option<f64>,
    target_vectors: Option<Vec<String>>,
    /// Maximum number of results to return (default 10).
    limit: Option<u32>,
    /// Only objects matching this filter (Weaviate's `where` shape).
    filters: Option<Filter>,
    /// Properties to return; all of them when omitted.
    return_properties: Option<Vec<String>>,
    /// Metadata to return in `additional`: id, vector, distance, score, explainScore,
    /// creationTimeUnix, lastUpdateTimeUnix, certainty.
    return_metadata: Option<Vec<String>>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Bm25Params {
    /// The keywords to search for.
    query: String,
    collection_name: String,
    #[serde(alias = "tenant_name")]
    tenant: Option<String>,
    /// Properties to search; all text properties when omitted.
    target_properties: Option<Vec<String>>,
    /// Maximum number of results to return (default 10).
    limit: Option<u32>,
    /// Only objects matching this filter (Weaviate's `where` shape).
    filters: Option<Filter>,
    /// Properties to return; all of them when omitted.
    return_properties: Option<Vec<String>>,
    /// Metadata to return in `additional`: id, vector, distance, score, explainScore,
    /// creationTimeUnix, lastUpdateTimeUnix, certainty.
    return_metadata: Option<Vec<String>>,
}

/// A metric of an aggregated property (which apply depends on its data type).
#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(super) enum Metric {
    Count,
    Type,
    Mean,
    Median,
    Mode,
    Maximum,
    Minimum,
    Sum,
    TotalTrue,
    TotalFalse,
    PercentageTrue,
    PercentageFalse,
}

impl Metric {
    fn as_str(self) -> &'static str {
        match self {
            Metric::Count => "count",
            Metric::Type => "type",
            Metric::Mean => "mean",
            Metric::Median => "median",
            Metric::Mode => "mode",
            Metric::Maximum => "maximum",
            Metric::Minimum => "minimum",
            Metric::Sum => "sum",
            Metric::TotalTrue => "totalTrue",
            Metric::TotalFalse => "totalFalse",
            Metric::PercentageTrue => "percentageTrue",
            Metric::PercentageFalse => "percentageFalse",
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AggregatePropertyParams {
    /// The property to aggregate.
    name: String,
    /// Metrics: count (default), type, mean, median, mode, maximum, minimum, sum for numbers and
    /// dates; totalTrue, totalFalse, percentageTrue, percentageFalse for booleans.
    #[serde(default)]
    metrics: Vec<Metric>,
    /// For text: the most frequent values, at most this many (1 to 100).
    top_occurrences: Option<u32>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AggregateParams {
    collection_name: String,
    #[serde(alias = "tenant_name")]
    tenant: Option<String>,
    /// Only objects matching this filter.
    filters: Option<Filter>,
    /// Per-property metrics; without them only the object count.
    #[serde(default)]
    properties: Vec<AggregatePropertyParams>,
}

pub(super) fn tools() -> Vec<ToolSpec> {
    let read = ToolAnnotations::new().read_only(true).idempotent(true).open_world(false);
    vec![
        ToolSpec::new::<HybridParams>(
            "weaviate-query-hybrid",
            "Hybrid search (keyword BM25 and vector, fused) in a Weaviate collection. alpha weighs them: 0 is pure keyword, 1 pure vector, default 0.5. Answers {results: [{class, properties, id, additional}]}, additional holding the requested return_metadata.",
            Verb::Read,
            read.clone(),
        ),
        ToolSpec::new::<NearTextParams>(
            "weaviate-query-near-text",
            "Vector search by meaning of a text in a Weaviate collection (needs a vectorizer). Answers {results: [{class, properties, id, additional}]}.",
            Verb::Read,
            read.clone(),
        ),
        ToolSpec::new::<NearVectorParams>(
            "weaviate-query-near-vector",
            "Vector search with a given query vector in a Weaviate collection. Answers {results: [{class, properties, id, additional}]}.",
            Verb::Read,
            read.clone(),
        ),
        ToolSpec::new::<Bm25Params>(
            "weaviate-query-bm25",
            "Keyword (BM25) search in a Weaviate collection. Answers {results: [{class, properties, id, additional}]}.",
            Verb::Read,
            read.clone(),
        ),
        ToolSpec::new::<AggregateParams>(
            "weaviate-aggregate",
            "Count the objects of a Weaviate collection (optionally filtered) and compute per-property metrics: count, mean, minimum, maximum, sum, topOccurrences ... Answers {count, properties: {name: metrics}}.",
            Verb::Read,
            read,
        ),
    ]
}

pub(super) async fn call(
    server: &WeaviateServer,
    tool: &str,
    arguments: Option<Map<String, Value>>,
) -> Result<Value, ToolError> {
    let (collection, tenant, kind, common) = match tool {
        "weaviate-query-hybrid" => {
            let params: HybridParams = parse_arguments(arguments)?;
            let alpha = params.alpha.unwrap_or(DEFAULT_ALPHA);
            if !(0.0..=1.0).contains(&alpha) {
                return Err(ToolError::invalid_input(
                    "alpha: between 0.0 (keyword) and 1.0 (vector)",
                ));
            }
            let kind = SearchKind::Hybrid {
                query: params.query,
                alpha,
                target_vectors: names(params.target_vectors.as_deref(), "target_vectors")?,
                properties: names(params.target_properties.as_deref(), "target_properties")?,
            };
            (params.collection_name, params.tenant_name, kind, common!(params))
        }
        "weaviate-query-near-text" => {
            let params: NearTextParams = parse_arguments(arguments)?;
            check_threshold(params.distance, params.certainty)?;
            if params.query.trim().is_empty() {
                return Err(ToolError::invalid_input("query: the text to search for is empty"));
            }
            let kind = SearchKind::NearText {
                concepts: vec![params.query],
                distance: params.distance,
                certainty: params.certainty,
                target_vectors: names(params.target_vectors.as_deref(), "target_vectors")?,
            };
            (params.collection_name, params.tenant, kind, common!(params))
        }
        "weaviate-query-near-vector" => {
            let params: NearVectorParams = parse_arguments(arguments)?;
            check_threshold(params.distance, params.certainty)?;
            if params.vector.is_empty() || params.vector.iter().any(|value| !value.is_finite()) {
                return Err(ToolError::invalid_input("vector: a non-empty list of finite numbers"));
            }
            let kind = SearchKind::NearVector {
                vector: params.vector,
                distance: params.distance,
                certainty: params.certainty,
                target_vectors: names(params.target_vectors.as_deref(), "target_vectors")?,
            };
            (params.collection_name, params.tenant, kind, common!(params))
        }
        "weaviate-query-bm25" => {
            let params: Bm25Params = parse_arguments(arguments)?;
            let kind = SearchKind::Bm25 {
                query: params.query,
                properties: names(params.target_properties.as_deref(), "target_properties")?,
            };
            (params.collection_name, params.tenant, kind, common!(params))
        }
        "weaviate-aggregate" => return aggregate(server, parse_arguments(arguments)?).await,
        other => return Err(ToolError::not_found(format!("no query tool `{other}`"))),
    };
    let collection = collection_name(&collection)?;
    let tenant = tenant_name(tenant.as_deref(), "tenant")?;
    let limit = common.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(ToolError::invalid_input(format!("limit: between 1 and {MAX_LIMIT}")));
    }
    if let Some(filter) = &common.filters {
        filter.validate().map_err(ToolError::invalid_input)?;
    }
    let metadata = metadata(common.return_metadata.as_deref())?;
    let fields = match common.return_properties.as_deref() {
        Some(properties) => {
            names(Some(properties), "return_properties")?.into_iter().map(Field::Plain).collect()
        }
        None => server.fields(&collection).await?,
    };
    let request =
        Search { collection, tenant, kind, filter: common.filters, limit, fields, metadata };
    let hits = server
        .run(search::search(&server.client, &request))
        .await
        .map_err(|error| server.error(error, || collection_missing(&request.collection)))?;
    let results = hits
        .into_iter()
        .map(|hit| {
            json!({
                "class": hit.class,
                "properties": hit.properties,
                "id": hit.id,
                "additional": hit.additional,
            })
        })
        .collect();
    Ok(server.list_result("results", results))
}

fn check_threshold(distance: Option<f64>, certainty: Option<f64>) -> Result<(), ToolError> {
    match (distance, certainty) {
        (Some(_), Some(_)) => Err(ToolError::invalid_input("give distance or certainty, not both")),
        (Some(distance), None) if !distance.is_finite() || distance < 0.0 => {
            Err(ToolError::invalid_input("distance: a number of at least 0"))
        }
        (None, Some(certainty)) if !(0.0..=1.0).contains(&certainty) => {
            Err(ToolError::invalid_input("certainty: between 0 and 1"))
        }
        _ => Ok(()),
    }
}

/// The requested metadata, each one of [`METADATA`].
fn metadata(requested: Option<&[String]>) -> Result<Vec<&'static str>, ToolError> {
    let mut out = Vec::new();
    for (index, name) in requested.unwrap_or_default().iter().enumerate() {
        let Some(known) = METADATA.iter().find(|known| **known == name.as_str()) else {
            return Err(ToolError::invalid_input(format!(
                "return_metadata[{index}]: `{}` is not one of {}",
                name.chars().take(40).collect::<String>(),
                METADATA.join(", ")
            )));
        };
        if !out.contains(known) {
            out.push(*known);
        }
    }
    Ok(out)
}

async fn aggregate(server: &WeaviateServer, params: AggregateParams) -> Result<Value, ToolError> {
    let collection = collection_name(&params.collection_name)?;
    let tenant = tenant_name(params.tenant.as_deref(), "tenant")?;
    if let Some(filter) = &params.filters {
        filter.validate().map_err(ToolError::invalid_input)?;
    }
    let mut fields = Vec::with_capacity(params.properties.len());
    for (index, property) in params.properties.iter().enumerate() {
        let name = Name::parse(&property.name, &format!("properties[{index}].name"))
            .map_err(ToolError::invalid_input)?;
        let top_occurrences = match property.top_occurrences {
            Some(limit @ 1..=100) => Some(i64::from(limit)),
            Some(_) => {
                return Err(ToolError::invalid_input(format!(
                    "properties[{index}].top_occurrences: between 1 and 100"
                )));
            }
            None => None,
        };
        let mut metrics: Vec<&'static str> =
            property.metrics.iter().map(|metric| metric.as_str()).collect();
        metrics.dedup();
        if metrics.is_empty() && top_occurrences.is_none() {
            metrics.push("count");
        }
        fields.push(AggregateField { property: name, metrics, top_occurrences });
    }
    let request = Aggregation { collection, tenant, filter: params.filters, fields };
    server
        .run(search::aggregate(&server.client, &request))
        .await
        .map_err(|error| server.error(error, || collection_missing(&request.collection)))
}
