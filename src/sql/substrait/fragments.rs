//! SQL fragments with their PostgreSQL precedence, so that operands get parentheses exactly where
//! they need them, and the quoting of identifiers and string literals.

use super::Result;
use super::json::invalid;

pub(super) const P_OR: u8 = 1;
pub(super) const P_AND: u8 = 2;
pub(super) const P_NOT: u8 = 3;
pub(super) const P_IS: u8 = 4;
pub(super) const P_CMP: u8 = 5;
/// `BETWEEN`, `IN`, `LIKE`, `ILIKE`.
pub(super) const P_IN: u8 = 6;
/// Any other operator (`||`).
pub(super) const P_OP: u8 = 7;
pub(super) const P_ADD: u8 = 8;
pub(super) const P_MUL: u8 = 9;
pub(super) const P_NEG: u8 = 10;
pub(super) const P_ATOM: u8 = 11;

/// An SQL expression with its PostgreSQL precedence, so that operands get parentheses exactly
/// where they need them.
#[derive(Debug, Clone)]
pub(super) struct Sql {
    pub(super) text: String,
    pub(super) prec: u8,
    pub(super) kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    /// A column of the FROM item, with the name it has when selected without an alias.
    Column(String),
    /// A constant. A bare literal carries the type to cast it to in `GROUP BY`, where
    /// PostgreSQL would read it as a position (or reject it).
    Constant(Option<&'static str>),
    Computed,
}

impl Sql {
    pub(super) fn new(text: String, prec: u8) -> Sql {
        Sql { text, prec, kind: Kind::Computed }
    }

    pub(super) fn atom(text: String) -> Sql {
        Sql::new(text, P_ATOM)
    }

    pub(super) fn column(text: String, name: String) -> Sql {
        Sql { text, prec: P_ATOM, kind: Kind::Column(name) }
    }

    pub(super) fn constant(text: String, bare: Option<&'static str>) -> Sql {
        let prec = if text.starts_with('-') { P_NEG } else { P_ATOM };
        Sql { text, prec, kind: Kind::Constant(bare) }
    }

    /// The text, in parentheses when its precedence is below `min`.
    pub(super) fn wrap(&self, min: u8) -> String {
        if self.prec < min { format!("({})", self.text) } else { self.text.clone() }
    }
}

/// A left-associative infix operator.
pub(super) fn binary(op: &str, prec: u8, left: &Sql, right: &Sql) -> Sql {
    Sql::new(format!("{} {op} {}", left.wrap(prec), right.wrap(prec + 1)), prec)
}

/// A non-associative infix operator (comparisons). Under `IS` (`IS DISTINCT FROM`), lower
/// operators get parentheses too, for the reader.
pub(super) fn compare(op: &str, prec: u8, left: &Sql, right: &Sql) -> Sql {
    let min = if prec == P_IS { P_OP } else { prec + 1 };
    Sql::new(format!("{} {op} {}", left.wrap(min), right.wrap(min)), prec)
}

/// An associative operator over one or more operands.
pub(super) fn chain(op: &str, prec: u8, items: &[Sql]) -> Sql {
    match items {
        [one] => one.clone(),
        _ => Sql::new(
            items.iter().map(|item| item.wrap(prec)).collect::<Vec<_>>().join(&format!(" {op} ")),
            prec,
        ),
    }
}

pub(super) fn call(name: &str, args: &[Sql]) -> Sql {
    Sql::atom(format!("{name}({})", texts(args)))
}

pub(super) fn texts(items: &[Sql]) -> String {
    items.iter().map(|item| item.text.as_str()).collect::<Vec<_>>().join(", ")
}

/// A double-quoted identifier (validated by [`check_ident`] where it enters).
pub(super) fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

pub(super) fn check_ident(name: &str, path: &str) -> Result<()> {
    if name.is_empty() {
        return Err(invalid(path, "an identifier may not be empty"));
    }
    if name.contains('\0') {
        return Err(invalid(path, "an identifier may not contain a NUL character"));
    }
    Ok(())
}

/// A string literal: quotes doubled, and backslashes doubled inside `E'...'` so that the text
/// means the same whatever `standard_conforming_strings` is.
pub(super) fn string_literal(value: &str, path: &str) -> Result<String> {
    if value.contains('\0') {
        return Err(invalid(path, "a string may not contain a NUL character"));
    }
    let quoted = value.replace('\'', "''");
    Ok(if value.contains('\\') {
        format!("E'{}'", quoted.replace('\\', "\\\\"))
    } else {
        format!("'{quoted}'")
    })
}

pub(super) fn conjunction(conditions: &[Sql]) -> String {
    if let [condition] = conditions {
        return condition.text.clone();
    }
    conditions.iter().map(|c| c.wrap(P_AND)).collect::<Vec<_>>().join(" AND ")
}
