//! A compact, generic copy of a pg_query parse tree, built through the tree's own `Serialize`
//! implementation so that every node type and every field is reached without a hand-written
//! walker that could miss one. Compared with `serde_json::Value` it keeps field names as the
//! `&'static str` the derive provides, stores structs as short vectors instead of maps, and
//! leaves out fields that hold their default (`false`, `0`, `""`, `[]`, absent) and source
//! locations, which is most of a parse tree: classification reads the rest.

use std::fmt;

use serde::ser::{self, Serialize};

/// One value of the tree.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tree {
    Null,
    Bool(bool),
    Int(i64),
    Str(String),
    Seq(Vec<Tree>),
    /// A struct: its non-default fields, in declaration order.
    Struct(Vec<(&'static str, Tree)>),
    /// One case of a `oneof` (a parse-tree `Node`): its name and its value.
    Variant(&'static str, Box<Tree>),
}

impl Tree {
    /// Build the tree of `value`.
    pub(super) fn of<T: Serialize + ?Sized>(value: &T) -> Result<Tree, TreeError> {
        value.serialize(Builder)
    }

    /// A field of a struct (`None` when absent or default).
    pub(super) fn get(&self, key: &str) -> Option<&Tree> {
        match self {
            Tree::Struct(fields) => fields.iter().find(|(name, _)| *name == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn as_array(&self) -> Option<&[Tree]> {
        match self {
            Tree::Seq(items) => Some(items),
            _ => None,
        }
    }

    pub(super) fn as_str(&self) -> Option<&str> {
        match self {
            Tree::Str(text) => Some(text),
            _ => None,
        }
    }

    pub(super) fn as_i64(&self) -> Option<i64> {
        match self {
            Tree::Int(number) => Some(*number),
            _ => None,
        }
    }

    pub(super) fn as_bool(&self) -> Option<bool> {
        match self {
            Tree::Bool(flag) => Some(*flag),
            _ => None,
        }
    }

    /// The `(tag, body)` of a parse-tree `Node` (`{node: Tag(body)}`).
    pub(super) fn tagged(&self) -> Option<(&'static str, &Tree)> {
        match self.get("node")? {
            Tree::Variant(tag, body) => Some((tag, body)),
            _ => None,
        }
    }

    /// Whether a field holding this value carries nothing.
    fn is_default(&self) -> bool {
        match self {
            Tree::Null => true,
            Tree::Bool(flag) => !flag,
            Tree::Int(number) => *number == 0,
            Tree::Str(text) => text.is_empty(),
            Tree::Seq(items) => items.is_empty(),
            Tree::Struct(_) | Tree::Variant(..) => false,
        }
    }
}

/// The tree could not be built (a type the parse tree never contains).
#[derive(Debug)]
pub(super) struct TreeError(String);

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TreeError {}

impl ser::Error for TreeError {
    fn custom<T: fmt::Display>(message: T) -> TreeError {
        TreeError(message.to_string())
    }
}

struct Builder;

fn int<T: TryInto<i64>>(value: T) -> Result<Tree, TreeError> {
    Ok(Tree::Int(value.try_into().unwrap_or(i64::MAX)))
}

impl ser::Serializer for Builder {
    type Ok = Tree;
    type Error = TreeError;
    type SerializeSeq = SeqBuilder;
    type SerializeTuple = SeqBuilder;
    type SerializeTupleStruct = SeqBuilder;
    type SerializeTupleVariant = VariantSeqBuilder;
    type SerializeMap = MapBuilder;
    type SerializeStruct = StructBuilder;
    type SerializeStructVariant = VariantStructBuilder;

    fn serialize_bool(self, v: bool) -> Result<Tree, TreeError> {
        Ok(Tree::Bool(v))
    }
    fn serialize_i8(self, v: i8) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_i16(self, v: i16) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_i32(self, v: i32) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_i64(self, v: i64) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_u8(self, v: u8) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_u16(self, v: u16) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_u32(self, v: u32) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_u64(self, v: u64) -> Result<Tree, TreeError> {
        int(v)
    }
    fn serialize_f32(self, v: f32) -> Result<Tree, TreeError> {
        Ok(Tree::Str(v.to_string()))
    }
    fn serialize_f64(self, v: f64) -> Result<Tree, TreeError> {
        Ok(Tree::Str(v.to_string()))
    }
    fn serialize_char(self, v: char) -> Result<Tree, TreeError> {
        Ok(Tree::Str(v.to_string()))
    }
    fn serialize_str(self, v: &str) -> Result<Tree, TreeError> {
        Ok(Tree::Str(v.to_owned()))
    }
    fn serialize_bytes(self, v: &[u8]) -> Result<Tree, TreeError> {
        Ok(Tree::Str(String::from_utf8_lossy(v).into_owned()))
    }
    fn serialize_none(self) -> Result<Tree, TreeError> {
        Ok(Tree::Null)
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Result<Tree, TreeError> {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Result<Tree, TreeError> {
        Ok(Tree::Null)
    }
    fn serialize_unit_struct(self, _name: &'static str) -> Result<Tree, TreeError> {
        Ok(Tree::Struct(Vec::new()))
    }
    fn serialize_unit_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
    ) -> Result<Tree, TreeError> {
        Ok(Tree::Variant(variant, Box::new(Tree::Struct(Vec::new()))))
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        value: &T,
    ) -> Result<Tree, TreeError> {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        value: &T,
    ) -> Result<Tree, TreeError> {
        Ok(Tree::Variant(variant, Box::new(value.serialize(self)?)))
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<SeqBuilder, TreeError> {
        Ok(SeqBuilder(Vec::with_capacity(len.unwrap_or(0).min(64))))
    }
    fn serialize_tuple(self, len: usize) -> Result<SeqBuilder, TreeError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _name: &'static str,
        len: usize,
    ) -> Result<SeqBuilder, TreeError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantSeqBuilder, TreeError> {
        Ok(VariantSeqBuilder(variant, Vec::with_capacity(len.min(64))))
    }
    fn serialize_map(self, _len: Option<usize>) -> Result<MapBuilder, TreeError> {
        Ok(MapBuilder(Vec::new()))
    }
    fn serialize_struct(self, _name: &'static str, len: usize) -> Result<StructBuilder, TreeError> {
        Ok(StructBuilder(Vec::with_capacity(len.min(8))))
    }
    fn serialize_struct_variant(
        self,
        _name: &'static str,
        _index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<VariantStructBuilder, TreeError> {
        Ok(VariantStructBuilder(variant, Vec::with_capacity(len.min(8))))
    }
}

pub(super) struct SeqBuilder(Vec<Tree>);

impl ser::SerializeSeq for SeqBuilder {
    type Ok = Tree;
    type Error = TreeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), TreeError> {
        self.0.push(value.serialize(Builder)?);
        Ok(())
    }
    fn end(self) -> Result<Tree, TreeError> {
        Ok(Tree::Seq(self.0))
    }
}

impl ser::SerializeTuple for SeqBuilder {
    type Ok = Tree;
    type Error = TreeError;
    fn serialize_element<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), TreeError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Tree, TreeError> {
        ser::SerializeSeq::end(self)
    }
}

impl ser::SerializeTupleStruct for SeqBuilder {
    type Ok = Tree;
    type Error = TreeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), TreeError> {
        ser::SerializeSeq::serialize_element(self, value)
    }
    fn end(self) -> Result<Tree, TreeError> {
        ser::SerializeSeq::end(self)
    }
}

pub(super) struct VariantSeqBuilder(&'static str, Vec<Tree>);

impl ser::SerializeTupleVariant for VariantSeqBuilder {
    type Ok = Tree;
    type Error = TreeError;
    fn serialize_field<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), TreeError> {
        self.1.push(value.serialize(Builder)?);
        Ok(())
    }
    fn end(self) -> Result<Tree, TreeError> {
        Ok(Tree::Variant(self.0, Box::new(Tree::Seq(self.1))))
    }
}

/// Maps do not occur in parse trees; their values are kept (as a sequence) so that nothing
/// inside one would go unvisited if one ever did.
pub(super) struct MapBuilder(Vec<Tree>);

impl ser::SerializeMap for MapBuilder {
    type Ok = Tree;
    type Error = TreeError;
    fn serialize_key<T: Serialize + ?Sized>(&mut self, _key: &T) -> Result<(), TreeError> {
        Ok(())
    }
    fn serialize_value<T: Serialize + ?Sized>(&mut self, value: &T) -> Result<(), TreeError> {
        self.0.push(value.serialize(Builder)?);
        Ok(())
    }
    fn end(self) -> Result<Tree, TreeError> {
        Ok(Tree::Seq(self.0))
    }
}

pub(super) struct StructBuilder(Vec<(&'static str, Tree)>);

fn push_field<T: Serialize + ?Sized>(
    fields: &mut Vec<(&'static str, Tree)>,
    key: &'static str,
    value: &T,
) -> Result<(), TreeError> {
    if key == "location" || key.ends_with("_location") {
        return Ok(());
    }
    let value = value.serialize(Builder)?;
    if !value.is_default() {
        fields.push((key, value));
    }
    Ok(())
}

impl ser::SerializeStruct for StructBuilder {
    type Ok = Tree;
    type Error = TreeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), TreeError> {
        push_field(&mut self.0, key, value)
    }
    fn end(self) -> Result<Tree, TreeError> {
        Ok(Tree::Struct(self.0))
    }
}

pub(super) struct VariantStructBuilder(&'static str, Vec<(&'static str, Tree)>);

impl ser::SerializeStructVariant for VariantStructBuilder {
    type Ok = Tree;
    type Error = TreeError;
    fn serialize_field<T: Serialize + ?Sized>(
        &mut self,
        key: &'static str,
        value: &T,
    ) -> Result<(), TreeError> {
        push_field(&mut self.1, key, value)
    }
    fn end(self) -> Result<Tree, TreeError> {
        Ok(Tree::Variant(self.0, Box::new(Tree::Struct(self.1))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_keeps_what_classification_reads_and_drops_defaults() {
        let parsed = pg_query::parse("SELECT f(1) FROM s.t WHERE x", 0).unwrap();
        let node = parsed.protobuf.stmts[0].stmt.as_deref().unwrap();
        let tree = Tree::of(node).unwrap();
        let (tag, body) = tree.tagged().unwrap();
        assert_eq!(tag, "SelectStmt");
        assert!(body.get("into_clause").is_none(), "absent fields are left out");
        assert!(body.get("all").is_none(), "false fields are left out");
        let from = body.get("from_clause").and_then(Tree::as_array).unwrap();
        let (tag, range_var) = from[0].tagged().unwrap();
        assert_eq!(tag, "RangeVar");
        assert_eq!(range_var.get("schemaname").and_then(Tree::as_str), Some("s"));
        assert_eq!(range_var.get("relname").and_then(Tree::as_str), Some("t"));
        assert!(range_var.get("location").is_none(), "locations are left out");
    }
}
