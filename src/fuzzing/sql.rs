//! The SQL classifier's target: any bytes, read as UTF-8 (lossily, so NUL bytes and replacement
//! characters reach the parser too), classify to `Ok` or `Err` without a panic, every field of
//! every statement is readable, and the verdicts agree with each other.
//!
//! # Design notes
//!
//! `sql.rs`: classification.

use crate::sql::{StatementKind, classify as classify_sql};

pub(super) fn classify(data: &[u8]) {
    let sql = String::from_utf8_lossy(data);
    match classify_sql(&sql) {
        Ok(classification) => {
            for statement in &classification.statements {
                let _ = statement.kind.as_str();
                if let StatementKind::Utility(keyword) = statement.kind {
                    assert!(!keyword.is_empty());
                }
                // The text of a statement is a slice of the input.
                assert!(sql.contains(statement.text.as_str()));
                for name in
                    statement.tables.iter().chain(&statement.functions).chain(&statement.operators)
                {
                    let _ = name.to_string();
                }
                let _ = statement.attribute_names.len();
                for effect in &statement.effects {
                    let _ = effect.as_str();
                }
                let _ = statement.denied.join("; ");
                let _ = statement.plain_explain;
                // A statement that changes something is never a read.
                if statement.writes() {
                    assert!(!statement.is_read());
                }
                if !statement.effects.is_empty() {
                    assert!(statement.writes());
                }
            }
            // Classification is a function of the text.
            assert_eq!(
                classify_sql(&sql).map(|again| again.statements.len()).ok(),
                Some(classification.statements.len())
            );
        }
        Err(error) => {
            let _ = error.to_string();
        }
    }
}
