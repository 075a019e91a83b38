//! What every tool result and error passes through before it leaves orca, whichever server
//! made it, and every resource read, prompt and completion too: first the caller's masking
//! (`privacy::results`: by name and by kind for Metabase, Weaviate and external servers; by kind
//! only for the SQL tools and the `data` server's resources and prompts, whose rows PostgreSQL
//! masks by name; nothing for orca's own server, whose results are orca's metadata), then
//! credentials replaced with markers (`guard.secrets: redact`, `guard::secrets`). Both read the
//! structured content, the text and resource blocks (a blob where it decodes to text), a read's
//! contents, a prompt's description and messages, the completion values, the error's message,
//! hint and details, and a spliced result's bytes (never decoded into a `Value`); secrets also
//! an upstream's own `_meta`. An MCP App's page is scanned for credentials only (`contents`).
//! The tracking row is made from what this leaves, so it stores the masked and redacted text
//! only; `_meta` says how many values were masked and how many secrets redacted.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rmcp::model::{
    CallToolResult, CompleteResult, ContentBlock, GetPromptResult, MetaObject, ReadResourceResult,
    ResourceContents,
};
use serde_json::{Map, Value};

use crate::config::{Config, Principal, SecretsMode};
use crate::guard::secrets::{self, Redactions};
use crate::privacy::results::ResultMask;
use crate::splice::RawJson;
use crate::tool::{Spliced, ToolError};

/// Whose result it is, for what masking applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Origin {
    /// orca's own server (`list_servers`, `submit_feedback`): not masked.
    Orca,
    /// The SQL tools: masked by kind only.
    Sql,
    /// Metabase, Weaviate and external servers: masked by name and by kind.
    Other,
}

impl Origin {
    /// The origin of an internal server's results, by the server's name.
    pub(super) fn internal(server: &str) -> Origin {
        match server {
            "orca" => Origin::Orca,
            "postgres" | "data" => Origin::Sql,
            _ => Origin::Other,
        }
    }
}

/// One call's outgoing checks, and what they did.
#[derive(Debug)]
pub(super) struct Outgoing {
    secrets: bool,
    mask: Option<ResultMask>,
    masked: usize,
    redacted: Redactions,
}

impl Outgoing {
    pub(super) fn new(config: &Config, principal: &Principal, origin: Origin) -> Outgoing {
        let mask = match (&principal.masking, origin) {
            (Some(policy), Origin::Sql) => Some(ResultMask::new(policy.clone(), false)),
            (Some(policy), Origin::Other) => Some(ResultMask::new(policy.clone(), true)),
            (None, _) | (_, Origin::Orca) => None,
        }
        .filter(|mask| !mask.is_empty());
        Outgoing {
            secrets: config.guard.secrets == SecretsMode::Redact,
            mask,
            masked: 0,
            redacted: Redactions::default(),
        }
    }

    /// A domain value, or a structured content (an internal server's text block is written
    /// from it afterwards).
    pub(super) fn value(&mut self, value: &mut Value) {
        if let Some(mask) = &self.mask {
            self.masked += mask.value(value);
        }
        if self.secrets {
            secrets::redact_value(value, &mut self.redacted);
        }
    }

    /// A text block, or a message (JSON text is masked as JSON).
    pub(super) fn text(&mut self, text: &mut String) {
        if let Some(mask) = &self.mask {
            self.masked += mask.text(text);
        }
        if self.secrets {
            secrets::redact_in_place(text, &mut self.redacted);
        }
    }

    /// A pre-encoded member, read as bytes.
    pub(super) fn spliced(&mut self, spliced: Option<Spliced>) -> Option<Spliced> {
        let Spliced { key, mut json } = spliced?;
        if let Some(mask) = &self.mask
            && let Some((chunks, masked)) = mask.json_chunks(json.chunks())
        {
            json = RawJson::from_bytes(chunks);
            self.masked += masked;
        }
        if self.secrets
            && let Some(chunks) = secrets::redact_json_chunks(json.chunks(), &mut self.redacted)
        {
            json = RawJson::from_bytes(chunks);
        }
        Some(Spliced { key, json })
    }

    /// A tool error: its message, hint and details, and the attempts before it.
    pub(super) fn error(&mut self, error: &mut ToolError) {
        if let Some(mask) = &self.mask {
            self.masked += mask.text(&mut error.message);
        }
        if self.secrets {
            secrets::redact_in_place(&mut error.message, &mut self.redacted);
        }
        if let Some(hint) = &mut error.hint {
            self.text(hint);
        }
        if let Some(details) = &mut error.details {
            self.value(details);
        }
        if let Some(attempts) = &mut error.attempts {
            for earlier in &mut attempts.earlier {
                self.error(earlier);
            }
        }
    }

    /// An external server's result as it came: structured content, every text and embedded
    /// resource block, and (for credentials) the upstream's own `_meta`.
    pub(super) fn result(&mut self, result: &mut CallToolResult) {
        if let Some(structured) = &mut result.structured_content {
            self.value(structured);
        }
        for block in &mut result.content {
            self.block(block);
        }
        self.upstream_meta(result.meta.as_mut());
    }

    /// A resource read's contents as they came, and (for credentials) the upstream's own
    /// `_meta`. An MCP App's page (`text/html;profile=mcp-app`) is markup and script, not data:
    /// masking by kind could turn a number in its script into asterisks and break the page, so
    /// it is scanned for credentials only (the data it shows comes through tool results, masked
    /// there).
    pub(super) fn contents(&mut self, result: &mut ReadResourceResult) {
        for contents in &mut result.contents {
            let app = match contents {
                ResourceContents::TextResourceContents { mime_type, .. }
                | ResourceContents::BlobResourceContents { mime_type, .. } => {
                    mime_type.as_deref().is_some_and(is_app_page)
                }
                _ => false,
            };
            match (app, contents) {
                (true, ResourceContents::TextResourceContents { text, .. }) if self.secrets => {
                    secrets::redact_in_place(text, &mut self.redacted);
                }
                (true, _) => {}
                (false, contents) => self.resource(contents),
            }
        }
        self.upstream_meta(result.meta.as_mut());
    }

    /// A prompt as it came: its description, every message's text and embedded resource, and
    /// (for credentials) the upstream's own `_meta`.
    pub(super) fn prompt(&mut self, prompt: &mut GetPromptResult) {
        if let Some(description) = &mut prompt.description {
            self.text(description);
        }
        for message in &mut prompt.messages {
            self.block(&mut message.content);
        }
        self.upstream_meta(prompt.meta.as_mut());
    }

    /// A completion as it came: every value, and (for credentials) the upstream's own `_meta`.
    pub(super) fn completion(&mut self, completion: &mut CompleteResult) {
        for value in &mut completion.completion.values {
            self.text(value);
        }
        self.upstream_meta(completion.meta.as_mut());
    }

    /// A content block: its text, or its embedded resource's; images and links carry none.
    fn block(&mut self, block: &mut ContentBlock) {
        match block {
            ContentBlock::Text(text) => self.text(&mut text.text),
            ContentBlock::Resource(embedded) => self.resource(&mut embedded.resource),
            _ => {}
        }
    }

    /// A resource's text, or its blob where that decodes to UTF-8 text (encoded again when
    /// anything in it changed).
    fn resource(&mut self, contents: &mut ResourceContents) {
        match contents {
            ResourceContents::TextResourceContents { text, .. } => self.text(text),
            ResourceContents::BlobResourceContents { blob, .. } => {
                let Some(decoded) = STANDARD.decode(blob.as_bytes()).ok() else { return };
                let Ok(mut text) = String::from_utf8(decoded) else { return };
                let before = text.clone();
                self.text(&mut text);
                if text != before {
                    *blob = STANDARD.encode(text);
                }
            }
            _ => {}
        }
    }

    /// An upstream's own `_meta`: for credentials only, its keys being the protocol's.
    fn upstream_meta(&mut self, meta: Option<&mut MetaObject>) {
        if self.secrets
            && let Some(meta) = meta
        {
            for value in meta.0.values_mut() {
                secrets::redact_value(value, &mut self.redacted);
            }
        }
    }

    /// [`Outgoing::tell`] into a result's `_meta`, made only when there is something to say.
    pub(super) fn tell_in(&self, meta: &mut Option<MetaObject>) {
        let mut told = Map::new();
        self.tell(&mut told);
        if !told.is_empty() {
            meta.get_or_insert_with(MetaObject::default).0.extend(told);
        }
    }

    /// Say in `_meta` what was masked and redacted, when anything was.
    pub(super) fn tell(&self, meta: &mut Map<String, Value>) {
        if self.masked > 0
            && let Some(mask) = &self.mask
        {
            meta.insert("masked_values".into(), Value::from(self.masked));
            meta.insert("masking_policy".into(), Value::from(mask.policy_id()));
        }
        if !self.redacted.is_empty() {
            meta.insert("redacted_secrets".into(), Value::from(self.redacted.total()));
            meta.insert("redacted_kinds".into(), self.redacted.kinds());
        }
    }
}

/// Whether `mime_type` is an MCP App's page (`text/html;profile=mcp-app`, spaces and case aside).
fn is_app_page(mime_type: &str) -> bool {
    let compact: String = mime_type.chars().filter(|c| !c.is_whitespace()).collect();
    compact.eq_ignore_ascii_case(super::apps::MIME_TYPE)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::privacy::mask::MaskingPolicy;
    use crate::privacy::results::ValueKind;

    /// Checks with every kind masked by its default rule, and credentials redacted.
    fn outgoing() -> Outgoing {
        let policy = MaskingPolicy {
            id: "p".to_owned(),
            columns: std::collections::BTreeMap::new(),
            kinds: ValueKind::ALL.iter().map(|kind| (*kind, kind.default_rule())).collect(),
            salt: "salt".to_owned(),
        };
        Outgoing {
            secrets: true,
            mask: Some(ResultMask::new(Arc::new(policy), true)),
            masked: 0,
            redacted: Redactions::default(),
        }
    }

    fn blob(bytes: &[u8], mime_type: &str) -> ResourceContents {
        ResourceContents::BlobResourceContents {
            uri: "x://blob".to_owned(),
            mime_type: Some(mime_type.to_owned()),
            blob: STANDARD.encode(bytes),
            meta: None,
        }
    }

    fn text_of(contents: &ResourceContents) -> String {
        match contents {
            ResourceContents::TextResourceContents { text, .. } => text.clone(),
            ResourceContents::BlobResourceContents { blob, .. } => {
                String::from_utf8_lossy(&STANDARD.decode(blob).unwrap()).into_owned()
            }
            _ => unreachable!("two kinds of contents"),
        }
    }

    #[test]
    fn a_reads_text_and_text_blobs_are_masked_an_app_page_only_redacted() {
        let page =
            "<script>const phone = '+1 415 555 0100'; const key = 'AKIAIOSFODNN7EXAMPLE';</script>";
        let png = [0x89, b'P', b'N', b'G', 0xff, 0xfe, 0x00];
        let mut read = ReadResourceResult::new(vec![
            ResourceContents::text("write to ada@example.com", "x://text"),
            blob(b"key AKIAIOSFODNN7EXAMPLE for ada@example.com", "application/octet-stream"),
            blob(&png, "image/png"),
            ResourceContents::text(page, "ui://x/app.html")
                .with_mime_type("text/html; profile=mcp-app"),
        ]);
        let mut outgoing = outgoing();
        outgoing.contents(&mut read);
        let texts: Vec<String> = read.contents.iter().map(text_of).collect();
        assert_eq!(texts[0], "write to ***@example.com");
        assert_eq!(texts[1], "key [REDACTED:aws_access_key] for ***@example.com");
        assert_eq!(read.contents[2], blob(&png, "image/png"), "a binary blob is left alone");
        assert_eq!(
            texts[3],
            "<script>const phone = '+1 415 555 0100'; const key = '[REDACTED:aws_access_key]';</script>",
            "an app page keeps its numbers"
        );
        let mut meta = Map::new();
        outgoing.tell(&mut meta);
        assert_eq!(
            (meta["masked_values"].as_u64(), meta["redacted_secrets"].as_u64()),
            (Some(2), Some(2))
        );
        let mut plain = ResourceContents::text(page, "x://page.txt");
        outgoing.resource(&mut plain);
        assert!(!text_of(&plain).contains("415 555 0100"), "the same text elsewhere is masked");
    }
}
