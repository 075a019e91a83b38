//! The names external tools, prompts and resources get behind orca. A tool `t` of a server with
//! prefix `p` is `p_t`, cleaned to `[A-Za-z0-9_-]` and at most 64 characters (what clients
//! accept). When cleaning or shortening changed the name, a hash of the original is appended, so
//! the name is stable across restarts and two upstream names never map to one exposed name; the
//! catalog keeps the map back to the upstream name. Resource URIs become
//! `orca://<prefix>/<original uri>`, except an MCP App's `ui://<rest>`, which becomes
//! `ui://<prefix>/<rest>` (hosts render only `ui://` resources). A server with the empty prefix
//! keeps its names (cleaned the same way) and its resource URIs.
//!
//! # Design notes
//!
//! `names.rs`: exposed names (`<prefix>_<tool>`, cleaned, at most 64 characters, hash-suffixed when
//! changed) and `orca://<prefix>/<uri>` resource URIs; the empty prefix keeps a server's names and
//! URIs, and a URI no prefix claims belongs to that server.

use sha2::{Digest, Sha256};

/// The longest tool name orca exposes.
pub(crate) const MAX_NAME: usize = 64;

/// The exposed name of `upstream` from the server with `prefix`.
pub(crate) fn exposed_name(prefix: &str, upstream: &str) -> String {
    let joined =
        if prefix.is_empty() { upstream.to_owned() } else { format!("{prefix}_{upstream}") };
    let cleaned: String = joined
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect();
    if cleaned == joined && cleaned.len() <= MAX_NAME {
        return cleaned;
    }
    // 8 hex digits of the original name keep lossy names apart.
    let digest = Sha256::digest(joined.as_bytes());
    let suffix = hex::encode(&digest[..4]);
    let keep = MAX_NAME - suffix.len() - 1;
    let head: String = cleaned.chars().take(keep).collect();
    format!("{head}_{suffix}")
}

const RESOURCE_SCHEME: &str = "orca://";

/// The scheme of MCP Apps' UI resources (SEP-1865).
pub(crate) const UI_SCHEME: &str = "ui://";

/// `orca://<prefix>/<uri>`, or `ui://<prefix>/<rest>` for `ui://<rest>`: which server a resource
/// belongs to, in the URI itself.
pub(crate) fn exposed_uri(prefix: &str, upstream: &str) -> String {
    if prefix.is_empty() {
        return upstream.to_owned();
    }
    if let Some(rest) = upstream.strip_prefix(UI_SCHEME) {
        return format!("{UI_SCHEME}{prefix}/{rest}");
    }
    format!("{RESOURCE_SCHEME}{prefix}/{upstream}")
}

/// A listed tool's MCP Apps link (`_meta.ui.resourceUri`, and the older flat
/// `_meta["ui/resourceUri"]`) pointed at the resource's exposed URI.
pub(crate) fn rewrite_app_link(tool: &mut rmcp::model::Tool, prefix: &str) {
    let Some(meta) = tool.meta.as_mut() else { return };
    let rewrite = |value: &mut serde_json::Value| {
        if let Some(uri) = value.as_str().filter(|uri| uri.starts_with(UI_SCHEME)) {
            *value = serde_json::Value::from(exposed_uri(prefix, uri));
        }
    };
    if let Some(uri) = meta.get_mut("ui").and_then(|ui| ui.get_mut("resourceUri")) {
        rewrite(uri);
    }
    if let Some(uri) = meta.get_mut("ui/resourceUri") {
        rewrite(uri);
    }
}

/// A resource's contents with its URI as orca exposes it.
pub(crate) fn rewrite_content_uri(content: &mut rmcp::model::ResourceContents, prefix: &str) {
    match content {
        rmcp::model::ResourceContents::TextResourceContents { uri, .. }
        | rmcp::model::ResourceContents::BlobResourceContents { uri, .. } => {
            *uri = exposed_uri(prefix, uri);
        }
        _ => {}
    }
}

/// The prefix and upstream URI of an exposed resource URI.
pub(crate) fn split_uri(exposed: &str) -> Option<(&str, std::borrow::Cow<'_, str>)> {
    if let Some(rest) = exposed.strip_prefix(UI_SCHEME) {
        let (prefix, upstream) = rest.split_once('/')?;
        return (!prefix.is_empty() && !upstream.is_empty())
            .then(|| (prefix, format!("{UI_SCHEME}{upstream}").into()));
    }
    let rest = exposed.strip_prefix(RESOURCE_SCHEME)?;
    let (prefix, upstream) = rest.split_once('/')?;
    (!prefix.is_empty() && !upstream.is_empty()).then_some((prefix, upstream.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_names_are_prefixed_unchanged() {
        assert_eq!(exposed_name("github", "create_issue"), "github_create_issue");
        assert_eq!(exposed_name("my-srv", "get-x"), "my-srv_get-x");
        assert_eq!(exposed_name("", "test_simple_text"), "test_simple_text");
        assert_eq!(exposed_name("", "a.b").len(), "a_b".len() + 9);
    }

    #[test]
    fn odd_names_are_cleaned_shortened_and_kept_apart() {
        let weird = exposed_name("fx", "weird.tool name/x");
        assert!(weird.starts_with("fx_weird_tool_name_x_"), "{weird}");
        assert!(weird.len() <= MAX_NAME);
        // Two names that clean to the same text stay distinct, and the mapping is stable.
        let other = exposed_name("fx", "weird_tool.name/x");
        assert_ne!(weird, other);
        assert_eq!(weird, exposed_name("fx", "weird.tool name/x"));
        let long = "a".repeat(80);
        let shortened = exposed_name("fx", &long);
        assert_eq!(shortened.len(), MAX_NAME);
        assert_ne!(shortened, exposed_name("fx", &"a".repeat(81)));
        for name in [&weird, &shortened] {
            assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'));
        }
    }

    #[test]
    fn resource_uris_round_trip() {
        let uri = exposed_uri("everything", "test://static/resource/1?x=1#y");
        assert_eq!(uri, "orca://everything/test://static/resource/1?x=1#y");
        assert_eq!(split_uri(&uri), Some(("everything", "test://static/resource/1?x=1#y".into())));
        // An MCP App's resource keeps the `ui://` scheme hosts look for.
        let app = exposed_uri("fixture", "ui://fixture/hello.html");
        assert_eq!(app, "ui://fixture/fixture/hello.html");
        assert_eq!(split_uri(&app), Some(("fixture", "ui://fixture/hello.html".into())));
        assert_eq!(split_uri("ui://x"), None);
        assert_eq!(split_uri("res://catalogs"), None);
        assert_eq!(split_uri("orca://x"), None);
        assert_eq!(exposed_uri("", "test://static-text"), "test://static-text");
    }
}
