//! Log messages (`notifications/message`) that external servers send: labelled with the server
//! they came from and handed to every gateway session, which relays them to its client at the
//! level the client asked for (`logging/setLevel`).
//!
//! # Design notes
//!
//! `logs.rs`: `ExternalLog`, a server's log message (`notifications/message`) with its logger
//! prefixed by the server's key, which each upstream's client handler puts on one broadcast channel
//! of the set (`ExternalServers::subscribe_logs`); `severity` orders the levels.
//! `ExternalServers::complete` finds the server owning an exposed prompt name or `orca://` template
//! URI, rewrites the reference to the upstream's names and asks it (`Upstream::complete`: nothing
//! when the server lacks the `completions` capability, at most 100 values);
//! `ExternalServers::states` gives `/healthz` each server's key and state.
#![expect(
    deprecated,
    reason = "MCP logging is deprecated by SEP-2577, but the protocol versions clients speak today have it"
)]

use std::sync::Arc;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};

/// How many log messages wait for a slow session before it misses some.
pub(crate) const LOG_BUFFER: usize = 256;
/// The longest logger name relayed.
const MAX_LOGGER: usize = 128;

/// One log message of an external server, its logger prefixed with the server's key.
#[derive(Debug, Clone)]
pub(crate) struct ExternalLog {
    /// The key of the server that sent it.
    pub(crate) server: Arc<str>,
    pub(crate) message: LoggingMessageNotificationParam,
}

impl ExternalLog {
    /// The message as orca's clients see it: logger `<server>` or `<server>/<logger>`.
    pub(crate) fn new(
        server: Arc<str>,
        mut message: LoggingMessageNotificationParam,
    ) -> ExternalLog {
        let logger = match message.logger.take() {
            Some(logger) if !logger.is_empty() => format!("{server}/{logger}"),
            _ => server.to_string(),
        };
        message.logger = Some(logger.chars().take(MAX_LOGGER).collect());
        ExternalLog { server, message }
    }
}

/// RFC 5424 order, from `debug` (0) to `emergency` (7).
pub(crate) fn severity(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loggers_are_prefixed_with_the_server_and_levels_rank_by_severity() {
        let mut message = LoggingMessageNotificationParam::new(
            LoggingLevel::Warning,
            serde_json::json!({"message": "disk almost full"}),
        );
        message.logger = Some("storage".to_owned());
        let log = ExternalLog::new(Arc::from("files"), message.clone());
        assert_eq!(log.message.logger.as_deref(), Some("files/storage"));
        assert!(severity(LoggingLevel::Debug) < severity(LoggingLevel::Info));
        assert!(severity(LoggingLevel::Warning) < severity(LoggingLevel::Error));
        assert!(severity(LoggingLevel::Alert) < severity(LoggingLevel::Emergency));
        message.logger = None;
        assert_eq!(
            ExternalLog::new(Arc::from("files"), message).message.logger.as_deref(),
            Some("files")
        );
    }
}
