//! The walk of a pg_query parse tree that classification reads. It drives the tree's own derived
//! `Serialize` implementation with a `serde::Serializer` that consumes the events as they come:
//! every node type and every field is reached (no hand-written list of node types could miss
//! one), and no copy of the tree is built. Only what classification needs is kept: relation
//! names, the names of called functions and operators, attribute names, what the statement
//! changes, whether orca's own schema is named, and the parameter placeholders (`$n`); source
//! locations are not visited.
//!
//! A relation named without a schema may be a CTE. Since a statement's `WITH` clause comes after
//! its `FROM` clause in the field order, such names wait in a list until the statement that
//! encloses them ends, and each statement with a `WITH` clause takes out the names it defines.

use std::collections::BTreeSet;
use std::fmt;
use std::mem;

use serde::ser::{self, Serialize};

use super::policy;
use super::statement::{Effect, QualifiedName};

/// What a walk found in one statement.
#[derive(Debug, Default)]
pub(super) struct Facts {
    /// The tag of the walked node (`SelectStmt`, `InsertStmt` ...).
    pub(super) tag: Option<&'static str>,
    /// Relations named anywhere (CTE names excluded).
    pub(super) tables: BTreeSet<QualifiedName>,
    pub(super) functions: BTreeSet<QualifiedName>,
    pub(super) attribute_names: BTreeSet<String>,
    pub(super) operators: BTreeSet<QualifiedName>,
    /// Changes found inside the statement (writable CTEs, `SELECT INTO`, row locks ...).
    pub(super) effects: BTreeSet<Effect>,
    /// Whether orca's own schema is written as an identifier somewhere (not a string constant).
    pub(super) names_state_schema: bool,
    /// The numbers of the parameter placeholders (`$1`, `$2` ...: `ParamRef` nodes) anywhere.
    pub(super) parameters: BTreeSet<i64>,
    /// How many parse-tree nodes the walk visited.
    pub(super) nodes: usize,
    /// Each relation named with its schema, and where in the statement its name begins (the
    /// schema's identifier), in the order they were met.
    pub(super) qualified: Vec<(QualifiedName, usize)>,
}

/// Walk `node` and everything under it.
///
/// # Errors
///
/// [`WalkError`] when the tree serializes something a parse tree never holds and serde refuses.
pub(super) fn walk(node: &pg_query::protobuf::Node) -> Result<Facts, WalkError> {
    let mut walker = Walker::default();
    node.serialize(&mut walker)?;
    let mut facts = walker.facts;
    // Names no enclosing `WITH` defines are relations.
    for name in walker.unresolved {
        facts.tables.insert(QualifiedName { schema: None, name });
    }
    Ok(facts)
}

/// The tree could not be walked (serde reported an error).
#[derive(Debug)]
pub(super) struct WalkError(String);

impl fmt::Display for WalkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WalkError {}

impl ser::Error for WalkError {
    fn custom<T: fmt::Display>(message: T) -> WalkError {
        WalkError(message.to_string())
    }
}

/// What one serialized value was, as far as the field that holds it needs to know.
#[derive(Debug, PartialEq)]
enum Seen {
    /// Absent, or a value nobody asked for.
    Nothing,
    Bool(bool),
    Int(i64),
    /// A string the field asked to capture.
    Str(String),
    /// A sequence with this many items.
    Items(usize),
    /// A struct, a map or a variant.
    Present,
}

/// A list of names (`FuncCall.funcname`, `AExpr.name`, `ColumnRef.fields`,
/// `A_Indirection.indirection`) whose `String` items are being collected.
#[derive(Clone, Copy)]
enum NameList {
    Function,
    Operator,
    /// Every item after the first is an attribute name.
    ColumnFields,
    /// Every item is an attribute name.
    Indirection,
}

/// The `String` nodes that are direct items of the list being serialized.
struct Collected {
    list: NameList,
    /// The depth of the struct that holds the list.
    depth: usize,
    /// Items seen so far.
    items: usize,
    /// The text of each `String` item, with its item index.
    parts: Vec<(usize, String)>,
}

#[derive(Default)]
struct Walker {
    facts: Facts,
    /// Structs open around the current event.
    depth: usize,
    /// The next string is to be captured.
    capture_str: bool,
    /// The next newtype variant is the tag of a parse-tree `Node`.
    node_follows: bool,
    /// The next struct is the body of a node with this tag.
    tag_follows: Option<&'static str>,
    /// The next struct is the target relation of a change.
    target_follows: bool,
    collected: Option<Collected>,
    /// Relation names written without a schema, not yet known to be relations or CTEs.
    unresolved: Vec<String>,
    /// One entry per open `WITH` clause: each CTE's name and the unresolved names inside it.
    ctes: Vec<Vec<(Option<String>, Vec<String>)>>,
    /// The CTE names of the `WITH` clause that just ended.
    with_names: Option<Vec<String>>,
}

impl Walker {
    /// The flags that describe the next event apply to that event only.
    fn clear(&mut self) {
        self.capture_str = false;
        self.node_follows = false;
        self.tag_follows = None;
        self.target_follows = false;
    }

    fn collect(&mut self, collected: Collected) {
        let parts = collected.parts;
        match collected.list {
            NameList::Function | NameList::Operator => {
                let mut parts: Vec<String> = parts.into_iter().map(|(_, part)| part).collect();
                let Some(name) = parts.pop() else { return };
                // `schema.name`, or `name`; three parts keep the last two.
                let name = QualifiedName { schema: parts.pop(), name };
                if matches!(collected.list, NameList::Function) {
                    self.facts.functions.insert(name);
                } else {
                    self.facts.operators.insert(name);
                }
            }
            NameList::ColumnFields => self
                .facts
                .attribute_names
                .extend(parts.into_iter().filter(|(index, _)| *index > 0).map(|(_, part)| part)),
            NameList::Indirection => {
                self.facts.attribute_names.extend(parts.into_iter().map(|(_, part)| part));
            }
        }
    }

    /// A `WITH` clause ended: each CTE sees the CTEs before it (all of them, itself included,
    /// under `RECURSIVE`), so a name inside it that it cannot see is a relation; the names it
    /// defines are handed to the statement that holds the clause.
    fn end_with(&mut self, recursive: bool) {
        let frame = self.ctes.pop().unwrap_or_default();
        let names: Vec<String> = frame.iter().filter_map(|(name, _)| name.clone()).collect();
        for (name, inside) in frame {
            let visible = if recursive {
                &names[..]
            } else {
                let before = names.iter().position(|n| Some(n) == name.as_ref());
                &names[..before.unwrap_or(names.len())]
            };
            self.unresolved.extend(inside.into_iter().filter(|n| !visible.contains(n)));
        }
        self.with_names = Some(names);
    }
}

fn int<T: TryInto<i64>>(walker: &mut Walker, value: T) -> Result<Seen, WalkError> {
    walker.clear();
    Ok(Seen::Int(value.try_into().unwrap_or(i64::MAX)))
}

impl<'a> ser::Serializer for &'a mut Walker {
    type Ok = Seen;
    type Error = WalkError;
    type SerializeSeq = SeqWalk<'a>;
    type SerializeTuple = SeqWalk<'a>;
    type SerializeTupleStruct = SeqWalk<'a>;
    type SerializeTupleVariant = SeqWalk<'a>;
    type SerializeMap = SeqWalk<'a>;
    type SerializeStruct = StructWalk<'a>;
    type SerializeStructVariant = StructWalk<'a>;

    fn serialize_bool(self, v: bool) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_i16(self, v: i16) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_i32(self, v: i32) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_i64(self, v: i64) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_u8(self, v: u8) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_u16(self, v: u16) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_u32(self, v: u32) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_u64(self, v: u64) -> Result<Seen, WalkError> {
        int(self, v)
    }
    fn serialize_f32(self, _v: f32) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Nothing)
    }
    fn serialize_f64(self, _v: f64) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Nothing)
    }
    fn serialize_char(self, _v: char) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Nothing)
    }
    fn serialize_str(self, v: &str) -> Result<Seen, WalkError> {
        let capture = self.capture_str;
        self.clear();
        Ok(if capture { Seen::Str(v.to_owned()) } else { Seen::Nothing })
    }
    fn serialize_bytes(self, _v: &[u8]) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Nothing)
    }
    fn serialize_none(self) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Nothing)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Seen, WalkError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Nothing)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Present)
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
    ) -> Result<Seen, WalkError> {
        self.clear();
        Ok(Seen::Present)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Seen, WalkError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Seen, WalkError> {
        let is_node = self.node_follows;
        self.clear();
        if is_node {
            self.tag_follows = Some(variant);
            self.facts.tag.get_or_insert(variant);
        }
        value.serialize(&mut *self)?;
        Ok(Seen::Present)
    }
    fn serialize_seq(self, _len: Option<usize>) -> Result<SeqWalk<'a>, WalkError> {
        self.clear();
        Ok(SeqWalk { walker: self, items: 0 })
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqWalk<'a>, WalkError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqWalk<'a>, WalkError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        _variant: &'static str,
        len: usize,
    ) -> Result<SeqWalk<'a>, WalkError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_map(self, len: Option<usize>) -> Result<SeqWalk<'a>, WalkError> {
        self.serialize_seq(len)
    }
    fn serialize_struct(
        self,
        name: &'static str,
        _len: usize,
    ) -> Result<StructWalk<'a>, WalkError> {
        let tag = self.tag_follows.take();
        let target = self.target_follows;
        self.clear();
        self.depth += 1;
        if name == "Node"
            && let Some(collected) = &mut self.collected
            && self.depth == collected.depth + 1
        {
            collected.items += 1;
        }
        if name == "WithClause" {
            self.ctes.push(Vec::new());
        }
        let start = self.unresolved.len();
        Ok(StructWalk {
            walker: self,
            name,
            tag,
            target,
            start,
            relname: None,
            schemaname: None,
            location: None,
            sval: None,
            ctename: None,
            number: 0,
            recursive: false,
            with_names: None,
            after_with: Vec::new(),
        })
    }
    fn serialize_struct_variant(
        self,
        name: &'static str,
        _index: u32,
        _variant: &'static str,
        len: usize,
    ) -> Result<StructWalk<'a>, WalkError> {
        self.serialize_struct(name, len)
    }
}

/// A sequence, tuple or map: every item (every key and value) is walked.
struct SeqWalk<'a> {
    walker: &'a mut Walker,
    items: usize,
}

impl SeqWalk<'_> {
    fn item<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        value.serialize(&mut *self.walker)?;
        self.items += 1;
        Ok(())
    }

    fn items(self) -> Seen {
        Seen::Items(self.items)
    }

    fn present(self) -> Seen {
        Seen::Present
    }
}

/// The sequence-like compound serializers: each element is walked; `end` reports how many
/// there were (or only that the value is present, for a tuple variant).
macro_rules! seq_walk {
    ($($trait:ident::$method:ident => $end:ident;)*) => {$(
        impl ser::$trait for SeqWalk<'_> {
            type Ok = Seen;
            type Error = WalkError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
                self.item(value)
            }
            fn end(self) -> Result<Seen, WalkError> {
                Ok(self.$end())
            }
        }
    )*};
}

seq_walk! {
    SerializeSeq::serialize_element => items;
    SerializeTuple::serialize_element => items;
    SerializeTupleStruct::serialize_field => items;
    SerializeTupleVariant::serialize_field => present;
}

/// Maps do not occur in parse trees; their keys and values are walked so that nothing inside
/// one would go unvisited if one ever did.
impl ser::SerializeMap for SeqWalk<'_> {
    type Ok = Seen;
    type Error = WalkError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, key: &T) -> Result<(), WalkError> {
        self.item(key)
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), WalkError> {
        self.item(value)
    }
    fn end(self) -> Result<Seen, WalkError> {
        Ok(Seen::Present)
    }
}

/// One struct of the tree (a node's body, a `Node` wrapper, or a message held directly).
struct StructWalk<'a> {
    walker: &'a mut Walker,
    /// The type's name (`Node`, `RangeVar`, `WithClause` ...).
    name: &'static str,
    /// The node tag when this struct is the body of a parse-tree `Node`.
    tag: Option<&'static str>,
    /// Whether this is the target relation of an `INSERT`, `UPDATE`, `DELETE` or `MERGE`.
    target: bool,
    /// The length of `Walker::unresolved` when the struct began.
    start: usize,
    relname: Option<String>,
    schemaname: Option<String>,
    /// Where a relation's name begins (`RangeVar.location`, which follows its names).
    location: Option<usize>,
    sval: Option<String>,
    ctename: Option<String>,
    /// `OnConflictClause.action`, `MergeWhenClause.command_type` or `ParamRef.number`.
    number: i64,
    /// `WithClause.recursive`.
    recursive: bool,
    /// The CTE names of this statement's `WITH` clause.
    with_names: Option<Vec<String>>,
    /// Unresolved names from inside this statement's CTEs, already checked against them.
    after_with: Vec<String>,
}

impl StructWalk<'_> {
    fn field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), WalkError> {
        if key == "location" || key.ends_with("_location") {
            if key == "location" && self.relname.is_some() {
                if let Seen::Int(at) = value.serialize(&mut *self.walker)? {
                    self.location = usize::try_from(at).ok();
                }
                self.walker.clear();
            }
            return Ok(());
        }
        let list = match (self.tag, key) {
            (Some("FuncCall"), "funcname") => Some(NameList::Function),
            (Some("AExpr"), "name") => Some(NameList::Operator),
            (Some("ColumnRef"), "fields") => Some(NameList::ColumnFields),
            (Some("AIndirection"), "indirection") => Some(NameList::Indirection),
            _ => None,
        };
        let walker = &mut *self.walker;
        let outer = list.map(|list| {
            let collected = Collected { list, depth: walker.depth, items: 0, parts: Vec::new() };
            walker.collected.replace(collected)
        });
        let with_start = (key == "with_clause").then(|| {
            walker.with_names = None;
            walker.unresolved.len()
        });
        walker.capture_str = match key {
            "relname" | "schemaname" => true,
            "sval" => self.tag == Some("String"),
            "ctename" => self.tag == Some("CommonTableExpr"),
            _ => false,
        };
        walker.node_follows = key == "node" && self.name == "Node";
        walker.target_follows = key == "relation"
            && matches!(self.tag, Some("InsertStmt" | "UpdateStmt" | "DeleteStmt" | "MergeStmt"));
        let seen = value.serialize(&mut *walker)?;
        walker.clear();
        if let Some(outer) = outer
            && let Some(collected) = mem::replace(&mut walker.collected, outer)
        {
            walker.collect(collected);
        }
        if let Some(start) = with_start {
            self.with_names = walker.with_names.take();
            self.after_with.extend(walker.unresolved.drain(start..));
        }
        match (key, seen) {
            ("relname", Seen::Str(text)) => self.relname = Some(text),
            ("schemaname", Seen::Str(text)) => self.schemaname = Some(text),
            ("sval", Seen::Str(text)) => self.sval = Some(text),
            ("ctename", Seen::Str(text)) => self.ctename = Some(text),
            ("into_clause", Seen::Present) => {
                walker.facts.effects.insert(Effect::Create);
            }
            ("locking_clause", Seen::Items(count)) if count > 0 => {
                walker.facts.effects.insert(Effect::LockRows);
            }
            ("recursive", Seen::Bool(flag)) => self.recursive = flag,
            ("action" | "command_type", Seen::Int(number)) => self.number = number,
            ("number", Seen::Int(number)) if self.tag == Some("ParamRef") => self.number = number,
            _ => {}
        }
        Ok(())
    }

    fn end(self) -> Seen {
        use pg_query::protobuf::{CmdType, OnConflictAction};
        let walker = self.walker;
        let depth = walker.depth;
        walker.depth -= 1;
        if self.tag.is_some() {
            walker.facts.nodes += 1;
        }
        // Names this statement's `WITH` clause defines are CTEs in the rest of the statement.
        if let Some(names) = &self.with_names {
            let rest = walker.unresolved.split_off(self.start.min(walker.unresolved.len()));
            walker.unresolved.extend(rest.into_iter().filter(|name| !names.contains(name)));
        }
        walker.unresolved.extend(self.after_with);
        // Any struct with a `relname` names a relation (a `RangeVar`, wherever it sits).
        if let Some(name) = self.relname.filter(|name| !name.is_empty()) {
            let schema = self.schemaname.filter(|schema| !schema.is_empty());
            if schema.is_some() || self.target {
                // The target of a change is always a relation, never a CTE of the same name.
                let relation = QualifiedName { schema, name };
                if let (Some(_), Some(at)) = (&relation.schema, self.location) {
                    walker.facts.qualified.push((relation.clone(), at));
                }
                walker.facts.tables.insert(relation);
            } else {
                walker.unresolved.push(name);
            }
        }
        match (self.tag, self.name) {
            (Some("String"), _) => {
                if let Some(text) = self.sval.filter(|text| !text.is_empty()) {
                    if text == policy::STATE_SCHEMA {
                        walker.facts.names_state_schema = true;
                    }
                    if let Some(collected) = &mut walker.collected
                        && depth == collected.depth + 2
                    {
                        collected.parts.push((collected.items.saturating_sub(1), text));
                    }
                }
            }
            (Some("ParamRef"), _) => {
                walker.facts.parameters.insert(self.number);
            }
            (Some("InsertStmt"), _) => {
                walker.facts.effects.insert(Effect::Insert);
            }
            (Some("UpdateStmt"), _) => {
                walker.facts.effects.insert(Effect::Update);
            }
            (Some("DeleteStmt"), _) => {
                walker.facts.effects.insert(Effect::Delete);
            }
            // A `MERGE` changes rows in the ways its `WHEN` clauses say.
            (Some("MergeWhenClause"), _) => {
                let effects: &[Effect] = match self.number {
                    c if c == CmdType::CmdInsert as i64 => &[Effect::Insert],
                    c if c == CmdType::CmdUpdate as i64 => &[Effect::Update],
                    c if c == CmdType::CmdDelete as i64 => &[Effect::Delete],
                    c if c == CmdType::CmdNothing as i64 => &[],
                    // Unknown actions are counted as every kind of change.
                    _ => &[Effect::Insert, Effect::Update, Effect::Delete],
                };
                walker.facts.effects.extend(effects.iter().copied());
            }
            (Some("CommonTableExpr"), _) => {
                let inside = walker.unresolved.split_off(self.start.min(walker.unresolved.len()));
                match walker.ctes.last_mut() {
                    Some(frame) => frame.push((self.ctename, inside)),
                    None => walker.unresolved.extend(inside),
                }
            }
            (_, "OnConflictClause") if self.number == OnConflictAction::OnconflictUpdate as i64 => {
                walker.facts.effects.insert(Effect::Update);
            }
            _ => {}
        }
        if self.name == "WithClause" {
            walker.end_with(self.recursive);
        }
        Seen::Present
    }
}

/// Structs and struct variants: each field is walked by name.
macro_rules! struct_walk {
    ($($trait:ident),*) => {$(
        impl ser::$trait for StructWalk<'_> {
            type Ok = Seen;
            type Error = WalkError;
            fn serialize_field<T: Serialize + ?Sized>(
                &mut self,
                key: &'static str,
                value: &T,
            ) -> Result<(), WalkError> {
                self.field(key, value)
            }
            fn end(self) -> Result<Seen, WalkError> {
                Ok(StructWalk::end(self))
            }
        }
    )*};
}

struct_walk!(SerializeStruct, SerializeStructVariant);

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(sql: &str) -> Facts {
        let parsed = pg_query::parse(sql, 0).unwrap();
        walk(parsed.protobuf.stmts[0].stmt.as_deref().unwrap()).unwrap()
    }

    fn names(set: &BTreeSet<QualifiedName>) -> Vec<String> {
        set.iter().map(ToString::to_string).collect()
    }

    /// Parse-tree nodes in serde's own rendering of the tree: objects `{"node": {Tag: body}}`.
    fn nodes_in(value: &serde_json::Value) -> usize {
        match value {
            serde_json::Value::Array(items) => items.iter().map(nodes_in).sum(),
            serde_json::Value::Object(map) => {
                let own = usize::from(
                    map.len() == 1 && map.get("node").is_some_and(serde_json::Value::is_object),
                );
                own + map.values().map(nodes_in).sum::<usize>()
            }
            _ => 0,
        }
    }

    #[test]
    fn the_walk_visits_every_node_that_serde_reaches() {
        let corpus = [
            "SELECT f(1) FROM s.t WHERE x",
            "WITH d AS (DELETE FROM l WHERE id = 1 RETURNING *) SELECT count(*) FILTER (WHERE x > 1) OVER w FROM d WINDOW w AS (ORDER BY y)",
            "SELECT (r).a[g(1)], x::jsonb ->> 'k', ARRAY[1, h(2)] FROM LATERAL k(3) AS r, ROWS FROM (m(4)) LIMIT n(5) OFFSET 1 FOR UPDATE",
            "INSERT INTO t (a) SELECT b FROM u ON CONFLICT (a) DO UPDATE SET a = excluded.a RETURNING p(a)",
            "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN UPDATE SET v = s.v WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.v)",
            "CREATE TABLE a (id int PRIMARY KEY DEFAULT nextval('s'), b text CHECK (length(b) > 1)) PARTITION BY RANGE (id)",
            "CREATE FUNCTION f(x int) RETURNS int LANGUAGE sql AS $$ SELECT x $$",
            "ALTER TABLE a ADD COLUMN c int GENERATED ALWAYS AS (g(id)) STORED",
            "COPY (SELECT 1) TO PROGRAM 'cat'",
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT * FROM t",
        ];
        for sql in corpus {
            let parsed = pg_query::parse(sql, 0).unwrap();
            let node = parsed.protobuf.stmts[0].stmt.as_deref().unwrap();
            let expected = nodes_in(&serde_json::to_value(node).unwrap());
            assert!(expected > 3, "{sql}");
            assert_eq!(walk(node).unwrap().nodes, expected, "{sql}");
        }
    }

    #[test]
    fn the_walk_keeps_what_classification_reads() {
        let found =
            facts("SELECT s.f(1), t.c, (x).y FROM s.t JOIN u ON a OPERATOR(pg_catalog.+) b");
        assert_eq!(found.tag, Some("SelectStmt"));
        assert_eq!(names(&found.tables), ["u", "s.t"]);
        assert_eq!(names(&found.functions), ["s.f"]);
        assert_eq!(names(&found.operators), ["pg_catalog.+"]);
        assert_eq!(found.attribute_names.iter().collect::<Vec<_>>(), ["c", "y"]);
        assert!(found.effects.is_empty());
        assert!(!found.names_state_schema);
        assert!(facts("DROP SCHEMA orca CASCADE").names_state_schema);
        assert!(!facts("SELECT 'orca'").names_state_schema, "string constants are not names");
        let found = facts("SELECT $2 FROM t WHERE a = ANY($1) LIMIT $2");
        assert_eq!(found.parameters.into_iter().collect::<Vec<_>>(), [1, 2]);
        assert!(facts("SELECT '$1', $$ $2 $$ AS \"$3\"").parameters.is_empty());
    }

    #[test]
    fn cte_names_shadow_relations_only_where_they_are_visible() {
        let found =
            facts("WITH a AS (SELECT * FROM b), b AS (SELECT * FROM a) SELECT * FROM a, b, c");
        assert_eq!(names(&found.tables), ["b", "c"], "the first CTE cannot see the second");
        let found = facts("WITH RECURSIVE a AS (SELECT * FROM a) SELECT * FROM a");
        assert!(found.tables.is_empty());
        let found = facts("SELECT * FROM (WITH a AS (SELECT 1) SELECT * FROM a) q, a");
        assert_eq!(names(&found.tables), ["a"], "a CTE is not visible outside its statement");
        let found = facts("WITH t AS (SELECT 1) INSERT INTO t SELECT * FROM t");
        assert_eq!(names(&found.tables), ["t"], "the target of a change is a relation");
        assert!(found.effects.contains(&Effect::Insert));
    }
}
