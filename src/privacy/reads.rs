//! The check that a statement cannot carry a masked column past the mask. Masking replaces the
//! cells of output columns by their names, so a masked column may reach the result only as
//! itself: a bare column reference in the list of the top-level `SELECT`, under its own name
//! (`SELECT email`, `SELECT c.email`, `SELECT *`, `SELECT c.*`). Anything else that reads it
//! could turn it into something the mask does not see, or tell about it through the rows
//! chosen or their order, and is refused:
//!
//! - a reference inside an expression (`lower(email)`, `email || ''`, `max(email)`), in
//!   `WHERE`, `JOIN ... ON`, `GROUP BY`, `HAVING`, `ORDER BY`, `DISTINCT ON`, a window, a
//!   subquery or a CTE, or in any statement that is not a plain `SELECT` (a set operation, a
//!   write);
//! - a renamed output column (`SELECT email AS e`);
//! - a whole-row reference (`row_to_json(c)`, `SELECT c FROM customer c`, `(c).email`) or a
//!   star inside an expression (`row_to_json(c.*)`), which carry every column;
//! - column lists that rename a relation's columns (`FROM customer AS c(a, b, ...)`, `WITH
//!   x(a, ...) AS`), `JOIN ... USING (email)`, a `NATURAL` join (it compares every column of
//!   the same name), a positional `ORDER BY` or `GROUP BY` onto a masked or star output, and
//!   `RETURNING`.
//!
//! The walk goes over the statement's parse tree in its serialized form, so every node type is
//! reached without a list of them. Names are compared regardless of case, as masking does.

use std::collections::BTreeSet;

use pg_query::NodeEnum;
use pg_query::protobuf::SetOperation;
use serde_json::Value;

/// Why a statement was refused for a caller with masked columns.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum MaskedRead {
    #[error(
        "`{column}` is masked for this caller and can only be read as it is: as a column of the top-level SELECT list under its own name ({place})"
    )]
    Column { column: String, place: &'static str },
    #[error(
        "{what} could carry a column masked for this caller past the mask; select the columns by name or with *"
    )]
    Carrier { what: String },
    #[error("the SQL does not parse: {0}")]
    Parse(String),
}

/// Checks that `sql` reads the columns `masked` (compared regardless of case) only as
/// themselves; see the module documentation for what is refused.
///
/// # Errors
///
/// [`MaskedRead`] naming the first column or construct that could carry a masked value.
pub(crate) fn check(sql: &str, masked: &dyn Fn(&str) -> bool) -> Result<(), MaskedRead> {
    let parsed = pg_query::parse(sql, 0).map_err(|error| MaskedRead::Parse(error.to_string()))?;
    for raw in &parsed.protobuf.stmts {
        let Some(node) = raw.stmt.as_ref().and_then(|stmt| stmt.node.as_ref()) else { continue };
        let tree =
            serde_json::to_value(node).map_err(|error| MaskedRead::Parse(error.to_string()))?;
        let mut relations = BTreeSet::new();
        relation_names(&tree, &mut relations);
        let walk = Walk { masked, relations: &relations };
        match node {
            NodeEnum::SelectStmt(select) if select.op == SetOperation::SetopNone as i32 => {
                walk.top_select(&tree)?;
            }
            // Outside a plain SELECT a star may land in columns of other names (`INSERT INTO t
            // SELECT *`, `CREATE VIEW v AS SELECT *`): no star is taken for the real names.
            _ => walk.anywhere(&tree, "in this statement", false)?,
        }
    }
    Ok(())
}

/// Every relation, alias and CTE name of the statement, lower-cased: a column reference by one
/// of these names alone is a whole row.
fn relation_names(value: &Value, out: &mut BTreeSet<String>) {
    match value {
        Value::Object(map) => {
            for key in ["relname", "aliasname", "ctename"] {
                if let Some(Value::String(name)) = map.get(key) {
                    out.insert(name.to_lowercase());
                }
            }
            for child in map.values() {
                relation_names(child, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|item| relation_names(item, out)),
        _ => {}
    }
}

/// The names of a `ColumnRef`'s fields (`None` for a star).
fn column_ref_fields(column_ref: &Value) -> Vec<Option<String>> {
    column_ref
        .get("fields")
        .and_then(Value::as_array)
        .map(|fields| {
            fields
                .iter()
                .map(|field| {
                    let node = field.get("node").unwrap_or(field);
                    node.get("String")
                        .and_then(|string| string.get("sval"))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `ColumnRef` a node is, when it is one.
fn as_column_ref(node: &Value) -> Option<&Value> {
    node.get("node").unwrap_or(node).get("ColumnRef")
}

/// Whether a list field of an object is present and not empty.
fn non_empty(map: &serde_json::Map<String, Value>, key: &str) -> bool {
    map.get(key).and_then(Value::as_array).is_some_and(|items| !items.is_empty())
}

struct Walk<'a> {
    masked: &'a dyn Fn(&str) -> bool,
    relations: &'a BTreeSet<String>,
}

impl Walk<'_> {
    /// The top-level `SELECT`: bare masked columns and stars in its list are fine; everything
    /// else is walked as [`Walk::anywhere`].
    fn top_select(&self, tree: &Value) -> Result<(), MaskedRead> {
        let Some(fields) = tree.get("SelectStmt").and_then(Value::as_object) else {
            return self.anywhere(tree, "in this statement", false);
        };
        // What each output position is: a masked column or a star (for positional references).
        let mut risky_positions: Vec<bool> = Vec::new();
        let targets =
            fields.get("target_list").and_then(Value::as_array).cloned().unwrap_or_default();
        for target in &targets {
            let Some(res_target) = target.get("node").unwrap_or(target).get("ResTarget") else {
                self.anywhere(target, "in the SELECT list", true)?;
                risky_positions.push(false);
                continue;
            };
            let alias =
                res_target.get("name").and_then(Value::as_str).filter(|name| !name.is_empty());
            let value = res_target.get("val").unwrap_or(&Value::Null);
            if let Some(column_ref) = as_column_ref(value) {
                let names = column_ref_fields(column_ref);
                match names.last() {
                    Some(None) => {
                        // `*` or `t.*`: the real names come out, and are masked.
                        risky_positions.push(true);
                        continue;
                    }
                    Some(Some(name)) if (self.masked)(name) => {
                        if let Some(alias) = alias
                            && !alias.eq_ignore_ascii_case(name)
                        {
                            return Err(MaskedRead::Column {
                                column: name.clone(),
                                place: "renamed with AS",
                            });
                        }
                        risky_positions.push(true);
                        continue;
                    }
                    _ => {}
                }
            }
            self.anywhere(value, "in an expression of the SELECT list", true)?;
            if let Some(indirection) = res_target.get("indirection") {
                self.anywhere(indirection, "in the SELECT list", true)?;
            }
            risky_positions.push(false);
        }
        for (key, place) in [("sort_clause", "ORDER BY"), ("group_clause", "GROUP BY")] {
            for item in fields.get(key).and_then(Value::as_array).into_iter().flatten() {
                if let Some(position) = positional(item)
                    && risky_positions.get(position.wrapping_sub(1)).copied().unwrap_or(true)
                {
                    return Err(MaskedRead::Carrier {
                        what: format!("a positional {place} onto a masked column or a star"),
                    });
                }
            }
        }
        for (key, child) in fields {
            if key == "target_list" {
                continue;
            }
            let place = match key.as_str() {
                "where_clause" => "in WHERE",
                "from_clause" => "in FROM or a JOIN",
                "group_clause" | "group_distinct" => "in GROUP BY",
                "having_clause" => "in HAVING",
                "sort_clause" => "in ORDER BY",
                "distinct_clause" => "in DISTINCT ON",
                "window_clause" => "in a window",
                "with_clause" => "in a CTE",
                _ => "in this statement",
            };
            self.anywhere(child, place, true)?;
        }
        Ok(())
    }

    /// Refuses any reference to a masked column, whole-row reference, star inside an
    /// expression, renaming column list, `USING` on a masked column, `NATURAL` join and
    /// `RETURNING` under `value`. A star that is a whole item of a `SELECT` list passes when
    /// `stars_keep_names` (its columns come out under their real names, and are masked by
    /// them); under a set operation it never does, since the output takes the first arm's
    /// names (`SELECT * FROM employee UNION SELECT * FROM customer`).
    fn anywhere(
        &self,
        value: &Value,
        place: &'static str,
        stars_keep_names: bool,
    ) -> Result<(), MaskedRead> {
        match value {
            Value::Object(map) => {
                if let Some(column_ref) = map.get("ColumnRef") {
                    return self.column_ref(column_ref, place);
                }
                let set_operation = map
                    .get("op")
                    .and_then(Value::as_i64)
                    .is_some_and(|op| op > SetOperation::SetopNone as i64);
                let stars_keep_names = stars_keep_names && !set_operation;
                if stars_keep_names && let Some(res_target) = map.get("ResTarget") {
                    // A star or a bare column in an inner SELECT list keeps its name; the name
                    // check still applies to it.
                    if let Some(column_ref) = res_target.get("val").and_then(as_column_ref)
                        && matches!(column_ref_fields(column_ref).last(), Some(None))
                    {
                        return Ok(());
                    }
                }
                if non_empty(map, "colnames") || non_empty(map, "aliascolnames") {
                    return Err(MaskedRead::Carrier {
                        what: "a column list that renames a relation's columns".to_owned(),
                    });
                }
                if map.get("is_natural").and_then(Value::as_bool) == Some(true) {
                    return Err(MaskedRead::Carrier { what: "a NATURAL join".to_owned() });
                }
                let returning = map
                    .get("returning_clause")
                    .and_then(Value::as_object)
                    .is_some_and(|clause| non_empty(clause, "exprs"));
                if returning || non_empty(map, "returning_list") {
                    return Err(MaskedRead::Carrier { what: "RETURNING".to_owned() });
                }
                if let Some(using) = map.get("using_clause").and_then(Value::as_array) {
                    for item in using {
                        let name = item
                            .get("node")
                            .unwrap_or(item)
                            .get("String")
                            .and_then(|string| string.get("sval"))
                            .and_then(Value::as_str);
                        if let Some(name) = name
                            && (self.masked)(name)
                        {
                            return Err(MaskedRead::Column {
                                column: name.to_owned(),
                                place: "in JOIN ... USING",
                            });
                        }
                    }
                }
                for child in map.values() {
                    self.anywhere(child, place, stars_keep_names)?;
                }
                Ok(())
            }
            Value::Array(items) => {
                items.iter().try_for_each(|item| self.anywhere(item, place, stars_keep_names))
            }
            _ => Ok(()),
        }
    }

    fn column_ref(&self, column_ref: &Value, place: &'static str) -> Result<(), MaskedRead> {
        let names = column_ref_fields(column_ref);
        if let Some(Some(name)) = names.iter().rev().find(|name| name.is_some())
            && names.last().is_some_and(Option::is_some)
            && (self.masked)(name)
        {
            return Err(MaskedRead::Column { column: name.clone(), place });
        }
        match names.as_slice() {
            [.., None] => Err(MaskedRead::Carrier { what: format!("a star {place}") }),
            [Some(name)] if self.relations.contains(&name.to_lowercase()) => {
                Err(MaskedRead::Carrier {
                    what: format!("the whole-row reference `{name}` {place}"),
                })
            }
            _ => Ok(()),
        }
    }
}

/// The position a `SortBy` or `GROUP BY` item names, when it is an integer constant.
fn positional(item: &Value) -> Option<usize> {
    let node = item.get("node").unwrap_or(item);
    let inner = node.get("SortBy").and_then(|sort| sort.get("node")).unwrap_or(node);
    let inner = inner.get("node").unwrap_or(inner);
    let constant = inner.get("AConst")?;
    let value = constant.get("val")?;
    let integer = value.get("Ival").or_else(|| value.get("ival"))?;
    let number =
        integer.get("ival").and_then(Value::as_i64).or_else(|| integer.as_i64()).unwrap_or(0);
    usize::try_from(number).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(name: &str) -> bool {
        ["email", "phone"].iter().any(|masked| masked.eq_ignore_ascii_case(name))
    }

    #[test]
    fn masked_columns_are_read_only_as_themselves() {
        let allowed = [
            "SELECT email, phone FROM customer",
            "SELECT c.email, c.first_name FROM customer c",
            "SELECT Email AS email FROM customer",
            "SELECT * FROM customer",
            "SELECT c.* FROM customer c JOIN invoice i ON i.customer_id = c.customer_id",
            "SELECT * FROM (SELECT * FROM customer) s",
            "SELECT first_name, lower(last_name) FROM customer WHERE country = 'Brazil' ORDER BY 2",
            "SELECT count(*) FROM customer",
            "SELECT email FROM customer ORDER BY customer_id",
            "SELECT first_name FROM customer GROUP BY 1",
        ];
        for sql in allowed {
            assert_eq!(check(sql, &masked), Ok(()), "{sql}");
        }
    }

    #[test]
    fn every_trick_that_could_carry_a_masked_column_past_the_mask_is_refused() {
        let refused = [
            ("SELECT lower(email) FROM customer", "`email` is masked"),
            ("SELECT email || '' FROM customer", "`email` is masked"),
            ("SELECT email::text FROM customer", "`email` is masked"),
            ("SELECT max(email) FROM customer", "`email` is masked"),
            ("SELECT first_name FROM customer WHERE email LIKE 'a%'", "in WHERE"),
            ("SELECT email AS e FROM customer", "renamed with AS"),
            ("SELECT email e FROM customer", "renamed with AS"),
            ("SELECT * FROM (SELECT email FROM customer) s", "in FROM"),
            ("SELECT (SELECT email FROM customer LIMIT 1)", "`email` is masked"),
            ("WITH x AS (SELECT email FROM customer) SELECT * FROM x", "in a CTE"),
            ("SELECT row_to_json(c) FROM customer c", "whole-row reference `c`"),
            ("SELECT to_jsonb(customer) FROM customer", "whole-row reference `customer`"),
            ("SELECT c FROM customer c", "whole-row reference `c`"),
            ("SELECT (c).email FROM customer c", "whole-row reference `c`"),
            ("SELECT row_to_json(c.*) FROM customer c", "a star"),
            ("SELECT first_name FROM customer ORDER BY email", "in ORDER BY"),
            ("SELECT email FROM customer ORDER BY 1", "positional ORDER BY"),
            ("SELECT * FROM customer ORDER BY 5", "positional ORDER BY"),
            ("SELECT count(*) FROM customer GROUP BY email", "in GROUP BY"),
            ("SELECT DISTINCT ON (phone) first_name FROM customer", "`phone` is masked"),
            ("SELECT a.first_name FROM customer a JOIN customer b ON a.email = b.email", "in FROM"),
            ("SELECT a.first_name FROM customer a JOIN customer b USING (email)", "USING"),
            ("SELECT * FROM customer NATURAL JOIN employee", "NATURAL"),
            ("SELECT x FROM customer AS c(a, b, c, d, e, f, g, h, i, j, x)", "column list"),
            ("WITH x(a) AS (SELECT * FROM customer) SELECT * FROM x", "column list"),
            (
                "SELECT first_name FROM customer UNION SELECT email FROM customer",
                "`email` is masked",
            ),
            ("SELECT 1 FROM customer HAVING max(email) > ''", "`email` is masked"),
            ("UPDATE customer SET company = 'x' RETURNING *", "RETURNING"),
            ("SELECT * FROM employee UNION SELECT * FROM customer", "a star"),
            ("SELECT * FROM (SELECT * FROM employee UNION ALL SELECT * FROM customer) s", "a star"),
            ("INSERT INTO contacts SELECT * FROM customer", "a star"),
            ("CREATE VIEW v AS SELECT * FROM customer", "a star"),
            ("INSERT INTO notes SELECT email FROM customer", "`email` is masked"),
            ("SELECT first_name FROM customer WHERE EMAIL = 'x'", "`email` is masked"),
        ];
        for (sql, expected) in refused {
            match check(sql, &masked) {
                Err(error) => assert!(error.to_string().contains(expected), "{sql}: {error}"),
                Ok(()) => panic!("{sql} was not refused"),
            }
        }
    }
}
