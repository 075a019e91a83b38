//! Paged reads without server-side state. A page token carries the sort-key values of the last
//! row it returned, signed with the orca secret and bound to the query, the caller and the
//! database; the next page continues *after* those values (keyset paging), so page 1,000 costs
//! what page 1 costs and any replica, after any restart, can serve it.
//!
//! The order of a paged result is the query's own `ORDER BY`, then a tie-breaker that makes it
//! total: the primary key of the one table a simple query reads, or else every output column in
//! its text form (byte order). Rows identical in every column cannot be told apart, so the token
//! also counts how many rows equal to the last one were already returned, and the next page
//! skips that many.
//!
//! An `ORDER BY` item that is not an output column (`SELECT name FROM artist ORDER BY
//! artist_id`, `ORDER BY lower(name)`, `ORDER BY a.id`) is carried as a hidden output column: the
//! paged query is the statement with those items appended to its select list
//! ([`with_hidden_keys`], through the parse tree and pg_query's deparser), their values go into
//! the page token like any key's, and the rows a caller gets leave them out.
//!
//! # Design notes
//!
//! `page.rs` is paging without server state: the `Shape` of a query's top level (its `ORDER BY`:
//! output columns by name or position, anything else as hidden output columns the paged query
//! appends to the statement's select list, `with_hidden_keys`, through the parse tree and
//! pg_query's deparser, classified again; whether it has its own `LIMIT`, whether it reads one
//! table simply), the keyset condition "at or after the last row" with directions and NULL order,
//! and signed page tokens; `read.rs`'s `paged_query` describes the statement, and again with the
//! hidden columns when there are any; `run_paged_read` picks the keys (the query's order, then the
//! primary key or every column as text), wraps the query, skips the rows equal to the boundary that
//! were already returned, and reports the next boundary.

use base64::Engine;
use pg_query::NodeEnum;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::confirm::Secret;

const TOKEN_PREFIX: &str = "orca_pt_";
const TOKEN_DOMAIN: &[u8] = b"orca-page-v1";

/// One item of the top-level `ORDER BY`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OrderItem {
    pub(crate) target: OrderTarget,
    pub(crate) descending: bool,
    /// `None`: PostgreSQL's default (last for ascending, first for descending).
    pub(crate) nulls_first: Option<bool>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OrderTarget {
    /// A bare name (`ORDER BY name`): an output column of that name if there is one (as
    /// PostgreSQL reads it), else a column of the query's input.
    Name(String),
    /// An output column by position, from 1 (`ORDER BY 2`).
    Position(usize),
    /// Anything else (`ORDER BY lower(name)`, `ORDER BY t.name`), which PostgreSQL evaluates
    /// over the query's input: never an output column.
    Expression,
}

/// What paging needs to know of a statement's top level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Shape {
    /// The `ORDER BY` items, or why they cannot be followed from outside the query.
    pub(crate) order: Result<Vec<OrderItem>, String>,
    /// Why the statement cannot be paged at all (`LIMIT`, `OFFSET`, locking), if it cannot.
    pub(crate) unpageable: Option<String>,
    /// The one table a simple query reads (no join, grouping, `DISTINCT` or set operation), by
    /// name: each output row is then one row of it.
    pub(crate) single_table: Option<(Option<String>, String)>,
}

impl Shape {
    /// A statement that cannot be paged at all, and why.
    pub(crate) fn unpageable(reason: &str) -> Shape {
        Shape {
            order: Err(reason.to_owned()),
            unpageable: Some(reason.to_owned()),
            single_table: None,
        }
    }
}

/// Read the top level of a `SELECT`.
pub(crate) fn shape(sql: &str) -> Shape {
    let not_select = Shape::unpageable;
    let Ok(parsed) = pg_query::parse(sql, 0) else {
        return not_select("the statement does not parse");
    };
    let Some(NodeEnum::SelectStmt(select)) = parsed
        .protobuf
        .stmts
        .first()
        .and_then(|raw| raw.stmt.as_ref())
        .and_then(|node| node.node.as_ref())
    else {
        return not_select("only a SELECT can be paged");
    };
    let unpageable = if select.limit_count.is_some() || select.limit_offset.is_some() {
        Some(
            "the query has its own LIMIT or OFFSET; remove it and use max_rows and page_token"
                .to_owned(),
        )
    } else if !select.locking_clause.is_empty() {
        Some("the query locks rows (FOR UPDATE/SHARE)".to_owned())
    } else if select.into_clause.is_some() {
        Some("SELECT INTO is not a read".to_owned())
    } else {
        None
    };
    let order = select
        .sort_clause
        .iter()
        .map(|node| match node.node.as_ref() {
            Some(NodeEnum::SortBy(sort)) => order_item(sort),
            _ => Err("an ORDER BY item is not understood".to_owned()),
        })
        .collect::<Result<Vec<OrderItem>, String>>();
    let simple = select.op <= 1
        && select.group_clause.is_empty()
        && select.having_clause.is_none()
        && select.distinct_clause.is_empty()
        && select.values_lists.is_empty()
        && select.with_clause.is_none();
    let single_table = match select.from_clause.as_slice() {
        [only] if simple => match only.node.as_ref() {
            Some(NodeEnum::RangeVar(range)) => Some((
                Some(range.schemaname.clone()).filter(|schema| !schema.is_empty()),
                range.relname.clone(),
            )),
            _ => None,
        },
        _ => None,
    };
    Shape { order, unpageable, single_table }
}

fn order_item(sort: &pg_query::protobuf::SortBy) -> Result<OrderItem, String> {
    use pg_query::protobuf::{SortByDir, SortByNulls};
    let descending = match SortByDir::try_from(sort.sortby_dir) {
        Ok(SortByDir::SortbyDesc) => true,
        Ok(SortByDir::SortbyUsing) => return Err("ORDER BY ... USING cannot be paged".to_owned()),
        _ => false,
    };
    let nulls_first = match SortByNulls::try_from(sort.sortby_nulls) {
        Ok(SortByNulls::SortbyNullsFirst) => Some(true),
        Ok(SortByNulls::SortbyNullsLast) => Some(false),
        _ => None,
    };
    let target = match sort.node.as_ref().and_then(|node| node.node.as_ref()) {
        Some(NodeEnum::ColumnRef(column)) => {
            match (column.fields.as_slice(), column.fields.last().and_then(|f| f.node.as_ref())) {
                ([_], Some(NodeEnum::String(name))) => OrderTarget::Name(name.sval.clone()),
                (_, Some(NodeEnum::String(_))) => OrderTarget::Expression,
                // `ORDER BY t.*` is a whole row, which one hidden column cannot carry.
                _ => {
                    return Err("ORDER BY names a column in a form that cannot be paged".to_owned());
                }
            }
        }
        Some(NodeEnum::AConst(constant)) => match &constant.val {
            Some(pg_query::protobuf::a_const::Val::Ival(position)) if position.ival >= 1 => {
                OrderTarget::Position(usize::try_from(position.ival).unwrap_or(usize::MAX))
            }
            _ => return Err("ORDER BY a constant cannot be paged".to_owned()),
        },
        Some(_) => OrderTarget::Expression,
        None => return Err("an ORDER BY item is not understood".to_owned()),
    };
    Ok(OrderItem { target, descending, nulls_first })
}

/// Which `ORDER BY` items (their indexes) are not output columns and must be carried as hidden
/// ones: expressions, and bare names that are not the name of an output column (`visible`).
pub(crate) fn hidden_items(order: &[OrderItem], visible: &[&str]) -> Vec<usize> {
    order
        .iter()
        .enumerate()
        .filter(|(_, item)| match &item.target {
            OrderTarget::Name(name) => !visible.contains(&name.as_str()),
            OrderTarget::Position(_) => false,
            OrderTarget::Expression => true,
        })
        .map(|(index, _)| index)
        .collect()
}

/// The name of the `n`th hidden output column (from 1); never shown to anyone.
fn hidden_name(n: usize) -> String {
    format!("orca_page_key_{n}")
}

/// `statement` with the `ORDER BY` items `items` (indexes, as [`hidden_items`] gives them)
/// appended to its select list, in that order, so that the paged query can read their values.
/// The new text is classified again and must name exactly the same tables, functions,
/// attributes and operators and still be a plain read, so that the deparser cannot make it
/// anything the checked statement was not.
///
/// # Errors
///
/// Why the statement cannot carry them (a set operation, `VALUES`, a deparser failure), in
/// words for the caller.
pub(crate) fn with_hidden_keys(
    statement: &super::statement::Statement,
    items: &[usize],
) -> Result<String, String> {
    use pg_query::protobuf::{Node, ResTarget};
    let cannot = "ORDER BY uses what the query does not select, and this query cannot carry it: \
                  select it (with an alias) and order by the alias";
    let mut parsed = pg_query::parse(&statement.text, 0).map_err(|_| cannot.to_owned())?;
    let Some(NodeEnum::SelectStmt(select)) = parsed
        .protobuf
        .stmts
        .first_mut()
        .and_then(|raw| raw.stmt.as_mut())
        .and_then(|node| node.node.as_mut())
    else {
        return Err(cannot.to_owned());
    };
    // A set operation's or a VALUES list's ORDER BY can name only output columns.
    if select.op > 1 || !select.values_lists.is_empty() {
        return Err(cannot.to_owned());
    }
    for (n, &index) in items.iter().enumerate() {
        let Some(NodeEnum::SortBy(sort)) =
            select.sort_clause.get(index).and_then(|n| n.node.as_ref())
        else {
            return Err(cannot.to_owned());
        };
        let facts = sort.node.as_deref().map(super::tree::walk).transpose();
        let functions = facts.map_err(|_| cannot.to_owned())?.map(|facts| facts.functions);
        if let Some(function) =
            functions.unwrap_or_default().into_iter().find(super::policy::differs_every_run)
        {
            return Err(format!(
                "ORDER BY calls {function}(), whose values change on every run: that order cannot be continued page by page"
            ));
        }
        let target = ResTarget {
            name: hidden_name(n + 1),
            indirection: Vec::new(),
            val: sort.node.clone(),
            location: -1,
        };
        select.target_list.push(Node { node: Some(NodeEnum::ResTarget(Box::new(target))) });
    }
    let text = parsed
        .protobuf
        .deparse(pg_query::DeparseOptions::default())
        .map_err(|_| cannot.to_owned())?;
    let same = super::classify::classify(&text).ok().is_some_and(|classification| {
        match classification.statements.as_slice() {
            [again] => {
                again.is_read()
                    && again.parameters.is_empty()
                    && again.is_cursor_query()
                    && again.tables == statement.tables
                    && again.functions == statement.functions
                    && again.attribute_names == statement.attribute_names
                    && again.operators == statement.operators
            }
            _ => false,
        }
    });
    if same { Ok(text) } else { Err(cannot.to_owned()) }
}

/// One sort key of a paged read, over an output column (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SortKey {
    pub(crate) column: usize,
    pub(crate) descending: bool,
    pub(crate) nulls_first: bool,
    /// Compared as the column's own type (named here), or, when `None`, as text in byte order.
    pub(crate) type_name: Option<String>,
    /// Whether the column may hold NULL (a `NOT NULL` table column cannot).
    pub(crate) nullable: bool,
}

impl SortKey {
    fn expression(&self) -> String {
        match &self.type_name {
            Some(_) => format!("q.\"c{}\"", self.column + 1),
            None => format!("(q.\"c{}\"::text COLLATE \"C\")", self.column + 1),
        }
    }

    fn parameter(&self, number: usize) -> String {
        match &self.type_name {
            Some(type_name) => format!("${number}::{type_name}"),
            None => format!("(${number}::text COLLATE \"C\")"),
        }
    }
}

/// `ORDER BY` of the paged read.
pub(crate) fn order_by(keys: &[SortKey]) -> String {
    keys.iter()
        .map(|key| {
            format!(
                "{} {} NULLS {}",
                key.expression(),
                if key.descending { "DESC" } else { "ASC" },
                if key.nulls_first { "FIRST" } else { "LAST" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The condition "at or after `boundary`" in the order of `keys`, with the boundary's non-null
/// values as parameters numbered from `first_parameter`; also returns which boundary values
/// are bound, in order.
pub(crate) fn at_or_after(
    keys: &[SortKey],
    boundary: &[Option<String>],
    first_parameter: usize,
) -> (String, Vec<String>) {
    let mut bound: Vec<String> = Vec::new();
    // Parameter numbers of the non-null boundary values, in key order.
    let numbers: Vec<Option<usize>> = boundary
        .iter()
        .map(|value| {
            value.as_ref().map(|value| {
                bound.push(value.clone());
                first_parameter + bound.len() - 1
            })
        })
        .collect();
    // Keys that cannot be NULL, all in one direction: one row comparison, which PostgreSQL
    // answers with an index range scan when an index matches the keys.
    let simple = !keys.is_empty()
        && numbers.iter().all(Option::is_some)
        && keys.iter().all(|key| !key.nullable)
        && keys.iter().all(|key| key.descending == keys[0].descending);
    if simple {
        let left: Vec<String> = keys.iter().map(SortKey::expression).collect();
        let right: Vec<String> = keys
            .iter()
            .zip(&numbers)
            .map(|(key, number)| key.parameter(number.unwrap_or_default()))
            .collect();
        let operator = if keys[0].descending { "<=" } else { ">=" };
        return (format!("(({}) {operator} ({}))", left.join(", "), right.join(", ")), bound);
    }
    let equal = |index: usize| -> String {
        let key = &keys[index];
        match numbers[index] {
            Some(number) => format!("{} = {}", key.expression(), key.parameter(number)),
            None => format!("{} IS NULL", key.expression()),
        }
    };
    let after = |index: usize| -> Option<String> {
        let key = &keys[index];
        let expression = key.expression();
        match numbers[index] {
            // After NULL: the non-null values when nulls sort first; nothing when they sort last.
            None => key.nulls_first.then(|| format!("{expression} IS NOT NULL")),
            Some(number) => {
                let comparison = format!(
                    "{expression} {} {}",
                    if key.descending { "<" } else { ">" },
                    key.parameter(number)
                );
                Some(if key.nulls_first || !key.nullable {
                    comparison
                } else {
                    format!("({comparison} OR {expression} IS NULL)")
                })
            }
        }
    };
    let mut alternatives = Vec::new();
    for index in 0..keys.len() {
        if let Some(step) = after(index) {
            let mut parts: Vec<String> = (0..index).map(equal).collect();
            parts.push(step);
            alternatives.push(format!("({})", parts.join(" AND ")));
        }
    }
    alternatives
        .push(format!("({})", (0..keys.len()).map(equal).collect::<Vec<_>>().join(" AND ")));
    (format!("({})", alternatives.join(" OR ")), bound)
}

/// What a page token says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PageToken {
    /// Hash of what the token continues (query, page size, time window, caller, database).
    #[serde(rename = "f")]
    pub(crate) fingerprint: String,
    /// Number of the page this token asks for (the first is 1).
    #[serde(rename = "p")]
    pub(crate) page: u64,
    /// Sort-key values (text forms) of the last row returned.
    #[serde(rename = "k")]
    pub(crate) boundary: Vec<Option<String>>,
    /// How many rows equal to the boundary on every key were returned already.
    #[serde(rename = "n")]
    pub(crate) equal_returned: u64,
    /// Rows returned by the pages before this one.
    #[serde(rename = "r", default)]
    pub(crate) returned: u64,
    /// The time window the first page resolved, in microseconds since the epoch.
    #[serde(rename = "w", default, skip_serializing_if = "Option::is_none")]
    pub(crate) window: Option<(Option<i64>, Option<i64>)>,
    /// Expiry, seconds since the epoch.
    #[serde(rename = "e")]
    pub(crate) expires: i64,
}

/// Why a page token is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum TokenError {
    #[error("the page token is malformed")]
    Malformed,
    #[error("the page token was altered or not issued by this orca")]
    Tampered,
    #[error("the page token has expired; run the query again without page_token")]
    Expired,
    #[error("the page token belongs to another query, caller or database")]
    Foreign,
}

/// The fingerprint of what a token may continue.
pub(crate) fn fingerprint(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_be_bytes());
        hasher.update(part.as_bytes());
    }
    hex::encode(&hasher.finalize()[..16])
}

impl PageToken {
    /// `orca_pt_<payload>.<signature>`, both base64url.
    pub(crate) fn encode(&self, secret: &Secret) -> String {
        let payload = serde_json::to_vec(self).unwrap_or_default();
        let signature = secret.mac(TOKEN_DOMAIN, &[&payload]);
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        format!("{TOKEN_PREFIX}{}.{}", engine.encode(&payload), engine.encode(&signature[..20]))
    }

    /// Check the signature, the expiry and that the token continues `fingerprint`.
    ///
    /// # Errors
    ///
    /// Which check failed.
    pub(crate) fn decode(
        text: &str,
        secret: &Secret,
        fingerprint: &str,
        now: i64,
    ) -> Result<PageToken, TokenError> {
        let engine = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let body = text.trim().strip_prefix(TOKEN_PREFIX).ok_or(TokenError::Malformed)?;
        let (payload, signature) = body.split_once('.').ok_or(TokenError::Malformed)?;
        let payload = engine.decode(payload).map_err(|_| TokenError::Malformed)?;
        let signature = engine.decode(signature).map_err(|_| TokenError::Malformed)?;
        let expected = secret.mac(TOKEN_DOMAIN, &[&payload]);
        if !constant_time_equal(&signature, &expected[..20]) {
            return Err(TokenError::Tampered);
        }
        let token: PageToken =
            serde_json::from_slice(&payload).map_err(|_| TokenError::Malformed)?;
        if token.expires < now {
            return Err(TokenError::Expired);
        }
        if token.fingerprint != fingerprint {
            return Err(TokenError::Foreign);
        }
        Ok(token)
    }
}

fn constant_time_equal(left: &[u8], right: &[u8]) -> bool {
    left.len() == right.len() && left.iter().zip(right).fold(0u8, |acc, (a, b)| acc | (a ^ b)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(column: usize, descending: bool, nulls_first: bool, typed: bool) -> SortKey {
        SortKey {
            column,
            descending,
            nulls_first,
            type_name: typed.then(|| "integer".to_owned()),
            nullable: true,
        }
    }

    #[test]
    fn shapes_say_what_can_be_paged() {
        let simple = shape(
            "SELECT id, name FROM public.artist WHERE id > 3 ORDER BY name DESC NULLS LAST, 1",
        );
        assert_eq!(simple.unpageable, None);
        assert_eq!(simple.single_table, Some((Some("public".into()), "artist".into())));
        assert_eq!(
            simple.order.unwrap(),
            vec![
                OrderItem {
                    target: OrderTarget::Name("name".into()),
                    descending: true,
                    nulls_first: Some(false)
                },
                OrderItem {
                    target: OrderTarget::Position(1),
                    descending: false,
                    nulls_first: None
                },
            ]
        );
        assert!(shape("SELECT * FROM t LIMIT 5").unpageable.is_some());
        assert!(shape("SELECT * FROM t OFFSET 5").unpageable.is_some());
        let expression = shape("SELECT a FROM t ORDER BY lower(a), t.b DESC, c");
        let targets: Vec<OrderTarget> =
            expression.order.unwrap().into_iter().map(|item| item.target).collect();
        assert_eq!(
            targets,
            [OrderTarget::Expression, OrderTarget::Expression, OrderTarget::Name("c".into())]
        );
        assert!(shape("SELECT a FROM t ORDER BY t.*").order.is_err());
        assert_eq!(shape("SELECT a FROM t JOIN u USING (a)").single_table, None);
        assert_eq!(shape("SELECT a, count(*) FROM t GROUP BY a").single_table, None);
        assert_eq!(shape("SELECT a FROM t UNION SELECT a FROM u").single_table, None);
        assert!(shape("SELECT a FROM t UNION SELECT a FROM u ORDER BY a").order.is_ok());
        assert!(shape("EXPLAIN SELECT 1").unpageable.is_some());
    }

    #[test]
    fn what_the_query_orders_by_but_does_not_select_is_appended_to_its_select_list() {
        let statement = |sql: &str| crate::sql::classify(sql).unwrap().statements.remove(0);
        let sql = "SELECT name AS n FROM artist a WHERE artist_id > 3 ORDER BY a.artist_id DESC, n, lower(name)";
        let order = shape(sql).order.unwrap();
        assert_eq!(hidden_items(&order, &["n"]), [0, 2]);
        let text = with_hidden_keys(&statement(sql), &[0, 2]).unwrap();
        assert_eq!(
            text,
            "SELECT name AS n, a.artist_id AS orca_page_key_1, lower(name) AS orca_page_key_2 \
             FROM artist a WHERE artist_id > 3 ORDER BY a.artist_id DESC, n, lower(name)"
        );
        // A bare name that is no output column is the input's.
        let order = shape("SELECT name FROM artist ORDER BY artist_id").order.unwrap();
        assert_eq!(hidden_items(&order, &["name"]), [0]);
        // An order that changes on every run cannot be continued.
        let random = statement("SELECT name FROM artist ORDER BY random()");
        assert!(with_hidden_keys(&random, &[0]).unwrap_err().contains("random()"));
        // What can name only output columns cannot carry anything else.
        let union = "SELECT name FROM artist UNION SELECT title FROM album ORDER BY lower(name)";
        assert!(with_hidden_keys(&statement(union), &[0]).is_err());
    }

    #[test]
    fn the_keyset_condition_handles_directions_and_nulls() {
        let keys = [key(0, false, false, true), key(1, true, true, false)];
        let (condition, bound) = at_or_after(&keys, &[Some("5".into()), Some("b".into())], 3);
        assert_eq!(bound, ["5", "b"]);
        assert_eq!(
            condition,
            "(((q.\"c1\" > $3::integer OR q.\"c1\" IS NULL)) \
             OR (q.\"c1\" = $3::integer AND (q.\"c2\"::text COLLATE \"C\") < ($4::text COLLATE \"C\")) \
             OR (q.\"c1\" = $3::integer AND (q.\"c2\"::text COLLATE \"C\") = ($4::text COLLATE \"C\")))"
        );
        // After a NULL that sorts last there is nothing more on that key.
        let (condition, bound) = at_or_after(&keys, &[None, Some("b".into())], 1);
        assert_eq!(bound, ["b"]);
        assert!(!condition.contains("q.\"c1\" >"), "{condition}");
        assert!(
            condition.contains(
                "q.\"c1\" IS NULL AND (q.\"c2\"::text COLLATE \"C\") < ($1::text COLLATE \"C\")"
            ),
            "{condition}"
        );
        // Keys that cannot be NULL and sort one way: one row comparison.
        let mut strict = [key(0, false, false, true), key(1, false, false, false)];
        for key in &mut strict {
            key.nullable = false;
        }
        let (condition, _) = at_or_after(&strict, &[Some("5".into()), Some("b".into())], 1);
        assert_eq!(
            condition,
            "((q.\"c1\", (q.\"c2\"::text COLLATE \"C\")) >= ($1::integer, ($2::text COLLATE \"C\")))"
        );
        assert_eq!(
            order_by(&keys),
            "q.\"c1\" ASC NULLS LAST, (q.\"c2\"::text COLLATE \"C\") DESC NULLS FIRST"
        );
    }

    #[test]
    fn tokens_refuse_tampering_expiry_and_other_queries() {
        let secret = Secret::from_text("0123456789abcdef0123456789abcdef");
        let token = PageToken {
            fingerprint: fingerprint(&["SELECT 1", "100"]),
            page: 2,
            boundary: vec![Some("42".into()), None],
            equal_returned: 1,
            returned: 100,
            window: None,
            expires: 1_000,
        };
        let text = token.encode(&secret);
        assert!(text.starts_with("orca_pt_"));
        assert_eq!(PageToken::decode(&text, &secret, &token.fingerprint, 999), Ok(token.clone()));
        assert_eq!(
            PageToken::decode(&text, &secret, &token.fingerprint, 1_001),
            Err(TokenError::Expired)
        );
        assert_eq!(PageToken::decode(&text, &secret, "other", 999), Err(TokenError::Foreign));
        let other_secret = Secret::from_text("another secret of at least 32 characters");
        assert_eq!(
            PageToken::decode(&text, &other_secret, &token.fingerprint, 999),
            Err(TokenError::Tampered)
        );
        // Change one character of the payload.
        let mut altered = text.clone().into_bytes();
        let position = TOKEN_PREFIX.len() + 5;
        altered[position] = if altered[position] == b'A' { b'B' } else { b'A' };
        let altered = String::from_utf8(altered).unwrap();
        assert!(matches!(
            PageToken::decode(&altered, &secret, &token.fingerprint, 999),
            Err(TokenError::Tampered | TokenError::Malformed)
        ));
        assert_eq!(PageToken::decode("garbage", &secret, "x", 0), Err(TokenError::Malformed));
    }
}
