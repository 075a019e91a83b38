//! MCP Apps (SEP-1865, the `io.modelcontextprotocol/ui` extension): orca's own results app, one
//! `ui://orca/results` page served from the binary, linked from the tools whose results are
//! tables or charts through `_meta.ui.resourceUri`. Only a client that declared the extension
//! (its `mimeTypes` naming `text/html;profile=mcp-app`) sees the link, the resource and the
//! extension in orca's capabilities; every other client gets exactly what it got before.
//!
//! External servers' `ui://` resources are theirs: listed and read like their other resources
//! (`external::names` gives them `ui://<prefix>/...`), their `_meta` passed on unchanged.

use rmcp::model::{ClientCapabilities, ReadResourceResult, Resource, ResourceContents, Tool};
use rmcp::service::{RequestContext, RoleServer};
use serde_json::{Value, json};

/// The extension's identifier in `capabilities.extensions`.
pub(super) const EXTENSION: &str = "io.modelcontextprotocol/ui";

/// The MIME type of an MCP App's HTML page.
pub(super) const MIME_TYPE: &str = "text/html;profile=mcp-app";

/// orca's results app.
pub(super) const RESULTS_URI: &str = "ui://orca/results";

/// The page itself: one self-contained HTML file (styles and script inline, nothing fetched).
const RESULTS_HTML: &str = include_str!("../../console/results-app.html");

/// The tools whose results the app shows, with their servers.
const LINKED: [(&str, &str); 7] = [
    ("postgres", "execute_sql"),
    ("postgres", "format_results"),
    ("data", "query_sql"),
    ("data", "query_plan"),
    ("data", "sample_table"),
    ("metabase", "execute_card_query"),
    ("metabase", "run_dataset_query"),
];

/// Whether the request's client declared the extension with the HTML profile: in the request
/// (2026-07-28), its session, or the token of a stateless client (`session_token`).
pub(super) fn declared(context: &RequestContext<RoleServer>) -> bool {
    super::session_token::client_capabilities(context).as_ref().is_some_and(declares)
}

/// Whether `capabilities` declare the extension with the HTML profile.
pub(super) fn declares(capabilities: &ClientCapabilities) -> bool {
    capabilities
        .extensions
        .as_ref()
        .and_then(|extensions| extensions.get(EXTENSION))
        .and_then(|settings| settings.get("mimeTypes"))
        .and_then(Value::as_array)
        .is_some_and(|types| types.iter().any(|kind| kind.as_str() == Some(MIME_TYPE)))
}

/// Whether `tool` of `server` shows its results in the app.
pub(super) fn is_linked(server: &str, tool: &str) -> bool {
    LINKED.iter().any(|&(owner, name)| owner == server && name == tool)
}

/// `tool` with its link to the results app (the nested `_meta.ui.resourceUri`, and the flat
/// `_meta["ui/resourceUri"]` older hosts read).
pub(super) fn linked(mut tool: Tool) -> Tool {
    let meta = tool.meta.get_or_insert_with(Default::default);
    let ui = meta.entry("ui").or_insert_with(|| json!({}));
    if let Some(ui) = ui.as_object_mut() {
        ui.insert("resourceUri".into(), Value::from(RESULTS_URI));
    }
    meta.insert("ui/resourceUri".into(), Value::from(RESULTS_URI));
    tool
}

/// The app's `_meta.ui`: a content security policy that allows nothing outside the page (no
/// connections, no resources, no frames), and a border around it.
fn resource_meta() -> rmcp::model::MetaObject {
    let mut meta = rmcp::model::MetaObject::default();
    meta.insert(
        "ui".into(),
        json!({
            "csp": { "connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": [] },
            "prefersBorder": true,
        }),
    );
    meta
}

/// The app as `resources/list` shows it.
pub(super) fn results_resource() -> Resource {
    let mut resource = Resource::new(RESULTS_URI, "orca results")
        .with_description(
            "orca's results view: rows as a sortable, paged table, a chart when the result suits one, and rating buttons",
        )
        .with_mime_type(MIME_TYPE);
    resource.meta = Some(resource_meta());
    resource
}

/// The app as `resources/read` answers it.
pub(super) fn results_contents() -> ReadResourceResult {
    let contents = ResourceContents::TextResourceContents {
        uri: RESULTS_URI.to_owned(),
        mime_type: Some(MIME_TYPE.to_owned()),
        text: RESULTS_HTML.to_owned(),
        meta: Some(resource_meta()),
    };
    ReadResourceResult::new(vec![contents])
}

/// The app resource a tool call says it comes from (`_meta.ui.resourceUri` on the request, which
/// a host may add to the calls its views make; MCP Apps itself marks them in no way).
pub(super) fn calling_app(meta: Option<&rmcp::model::RequestMetaObject>) -> Option<String> {
    let meta = meta?;
    let uri = meta
        .get("ui")
        .and_then(|ui| ui.get("resourceUri"))
        .or_else(|| meta.get("ui/resourceUri"))?;
    uri.as_str()
        .filter(|uri| uri.starts_with("ui://") && uri.len() <= 512)
        .map(|uri| uri.chars().filter(|c| !c.is_control()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_html_profile_counts_as_declared() {
        let check = |extensions: Value, expect: bool| {
            let capabilities: ClientCapabilities =
                serde_json::from_value(json!({ "extensions": extensions })).unwrap();
            assert_eq!(declares(&capabilities), expect, "{capabilities:?}");
        };
        check(json!({ EXTENSION: { "mimeTypes": [MIME_TYPE] } }), true);
        check(json!({ EXTENSION: { "mimeTypes": ["text/plain"] } }), false);
        check(json!({ EXTENSION: {} }), false);
        check(json!({ "other/ext": { "mimeTypes": [MIME_TYPE] } }), false);
        assert!(!declares(&ClientCapabilities::default()));
    }

    #[test]
    fn the_page_is_self_contained() {
        // Nothing the page would fetch: no remote script, style, image or font.
        for needle in [
            "src=\"http",
            "href=\"http",
            "url(http",
            "@import",
            "fetch(",
            "XMLHttpRequest",
            "WebSocket",
        ] {
            assert!(!RESULTS_HTML.contains(needle), "the page names {needle}");
        }
        assert!(RESULTS_HTML.contains("ui/initialize"));
    }
}
