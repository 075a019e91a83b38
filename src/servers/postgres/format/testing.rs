//! Helpers shared by the unit tests of the `format` modules.

use std::io::Cursor;

use serde_json::{Value, json};

use super::{Dataset, PNG_HEIGHT, PNG_WIDTH, parse_dataset};

const PNG_SIGNATURE: &[u8] = b"\x89PNG\r\n\x1a\n";

/// Parses test data that is known to be valid.
#[track_caller]
pub(super) fn data(input: Value) -> Dataset {
    match parse_dataset(&input) {
        Ok(data) => data,
        Err(error) => panic!("{input} did not parse: {error}"),
    }
}

/// The parts of a dataset a test compares: column names, declared types and rows.
pub(super) fn shape(data: &Dataset) -> Value {
    let names: Vec<&str> = data.columns.iter().map(|column| column.name.as_str()).collect();
    let types: Vec<Option<&str>> =
        data.columns.iter().map(|column| column.type_name.as_deref()).collect();
    json!({"columns": names, "types": types, "rows": data.rows})
}

/// Checks that `png` is a PNG of the chart size, by its header and by decoding it.
#[track_caller]
pub(super) fn check_png(png: &[u8]) {
    assert!(png.starts_with(PNG_SIGNATURE), "no PNG signature");
    assert_eq!(png.get(12..16), Some(&b"IHDR"[..]), "first chunk is not IHDR");
    let be = |range: std::ops::Range<usize>| {
        png.get(range).and_then(|bytes| bytes.try_into().ok()).map(u32::from_be_bytes)
    };
    assert_eq!((be(16..20), be(20..24)), (Some(PNG_WIDTH), Some(PNG_HEIGHT)));
    let mut reader = match png::Decoder::new(Cursor::new(png)).read_info() {
        Ok(reader) => reader,
        Err(error) => panic!("PNG does not decode: {error}"),
    };
    assert_eq!((reader.info().width, reader.info().height), (PNG_WIDTH, PNG_HEIGHT));
    let mut pixels = vec![0; reader.output_buffer_size().unwrap_or(0)];
    let frame = reader.next_frame(&mut pixels);
    assert!(frame.is_ok(), "PNG pixels do not decode: {frame:?}");
    assert!(pixels.iter().any(|byte| *byte != 255), "the PNG is blank");
}
