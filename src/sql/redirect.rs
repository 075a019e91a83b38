//! A statement's schema-qualified relations read from other schemas: `public.customer` becomes
//! `"other".customer` where a mapping names another schema for `public`, with the rest of the
//! text left exactly as it was written. The masked session of a caller uses it so that a
//! relation named with its schema reads the masked relation of the same name; a name it misses
//! (a catalog-qualified one) still reads the original, which that session may not read.

use super::statement::ParseError;
use super::tree;

/// `text` with the schema of every relation written as `schema.relation` replaced by
/// `to(schema)` where that gives one (quoted as an identifier); the rest as written.
///
/// # Errors
///
/// [`ParseError`] when PostgreSQL's grammar rejects the text.
pub(crate) fn redirect_schemas(
    text: &str,
    to: impl Fn(&str) -> Option<String>,
) -> Result<String, ParseError> {
    let parse_error = |message: String| ParseError { message };
    let parsed = pg_query::parse(text, 0).map_err(|error| parse_error(error.to_string()))?;
    let mut replaced: Vec<(usize, String, String)> = Vec::new();
    for raw in &parsed.protobuf.stmts {
        let Some(node) = raw.stmt.as_deref() else { continue };
        let facts = tree::walk(node).map_err(|error| parse_error(error.to_string()))?;
        for (relation, at) in facts.qualified {
            let Some(schema) = relation.schema else { continue };
            if let Some(other) = to(&schema) {
                replaced.push((at, schema, other));
            }
        }
    }
    if replaced.is_empty() {
        return Ok(text.to_owned());
    }
    replaced.sort_by_key(|(at, ..)| *at);
    replaced.dedup_by_key(|(at, ..)| *at);
    let tokens = pg_query::scan(text).map_err(|error| parse_error(error.to_string()))?.tokens;
    let mut out = String::with_capacity(text.len() + 32 * replaced.len());
    let mut copied = 0;
    for (at, schema, other) in replaced {
        // The relation's name begins with its schema's identifier, unless it is written with a
        // catalog too (`db.schema.table`): then it is left as written.
        let Some(token) = tokens.iter().find(|token| usize::try_from(token.start) == Ok(at)) else {
            continue;
        };
        let end = usize::try_from(token.end).unwrap_or(at);
        let Some(written) = text.get(at..end) else { continue };
        if at < copied || identifier_value(written) != schema {
            continue;
        }
        out.push_str(&text[copied..at]);
        out.push_str(&quote_identifier(&other));
        copied = end;
    }
    out.push_str(&text[copied..]);
    Ok(out)
}

/// What an identifier token names: a quoted one as written inside its quotes, a bare one folded
/// to lower case as the grammar folds it.
fn identifier_value(token: &str) -> String {
    match token.strip_prefix('"').and_then(|rest| rest.strip_suffix('"')) {
        Some(quoted) => quoted.replace("\"\"", "\""),
        None => token.to_ascii_lowercase(),
    }
}

/// `name` as a quoted identifier.
pub(crate) fn quote_identifier(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(sql: &str, expected: &str) {
        let to = |schema: &str| match schema {
            "public" => Some("m_public".to_owned()),
            "Sales" => Some("m \"sales\"".to_owned()),
            _ => None,
        };
        assert_eq!(redirect_schemas(sql, to).unwrap(), expected, "{sql}");
    }

    #[test]
    fn qualified_relations_read_the_mapped_schema_and_nothing_else_changes() {
        let cases = [
            ("SELECT * FROM customer", "SELECT * FROM customer"),
            ("SELECT * FROM public.customer", "SELECT * FROM \"m_public\".customer"),
            ("SELECT * FROM PUBLIC.customer c", "SELECT * FROM \"m_public\".customer c"),
            ("SELECT * FROM \"public\".\"customer\"", "SELECT * FROM \"m_public\".\"customer\""),
            ("SELECT * FROM \"Sales\".x", "SELECT * FROM \"m \"\"sales\"\"\".x"),
            // Bare Sales folds to sales, which is not mapped.
            ("SELECT * FROM Sales.x", "SELECT * FROM Sales.x"),
            ("SELECT * FROM other.customer", "SELECT * FROM other.customer"),
            (
                "SELECT (SELECT max(total) FROM public.invoice i WHERE i.customer_id = c.customer_id) FROM public.customer c",
                "SELECT (SELECT max(total) FROM \"m_public\".invoice i WHERE i.customer_id = c.customer_id) FROM \"m_public\".customer c",
            ),
            (
                "WITH x AS (SELECT 1 FROM public.a) SELECT * FROM x JOIN public.b ON true",
                "WITH x AS (SELECT 1 FROM \"m_public\".a) SELECT * FROM x JOIN \"m_public\".b ON true",
            ),
            // Functions, types and columns named with a schema are not relations.
            (
                "SELECT public.f(1)::public.t, 'public.customer' FROM public.customer",
                "SELECT public.f(1)::public.t, 'public.customer' FROM \"m_public\".customer",
            ),
            // A catalog-qualified name is left as written.
            ("SELECT * FROM db.public.customer", "SELECT * FROM db.public.customer"),
            ("SELECT * FROM public . customer", "SELECT * FROM \"m_public\" . customer"),
        ];
        for (sql, expected) in cases {
            check(sql, expected);
        }
    }

    #[test]
    fn text_that_does_not_parse_is_refused() {
        assert!(redirect_schemas("SELECT FROM FROM", |_| None).is_err());
    }
}
