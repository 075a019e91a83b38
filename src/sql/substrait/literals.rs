//! Literals and types: Substrait's protobuf-JSON literals (dates, timestamps, decimals, intervals,
//! binary) as PostgreSQL constants, and Substrait types as PostgreSQL type names.

use serde_json::{Map, Value};

use super::Result;
use super::fragments::{Sql, string_literal};
use super::json::{describe, get, int, invalid, object, oneof, opt_int, required, text};

/// The keys of a literal besides its value.
pub(super) const LITERAL_FLAGS: [&str; 2] = ["nullable", "typeVariationReference"];

pub(super) fn literal(lit: &Map<String, Value>, path: &str) -> Result<Sql> {
    let (kind, value) = oneof(lit, path, &LITERAL_FLAGS, "a literal")?;
    let path = format!("{path}.{kind}");
    let path = path.as_str();
    Ok(match kind.as_str() {
        "boolean" => match value {
            Value::Bool(b) => {
                Sql::constant(if *b { "TRUE" } else { "FALSE" }.to_owned(), Some("boolean"))
            }
            other => {
                return Err(invalid(
                    path,
                    format!("expected a boolean, found {}", describe(other)),
                ));
            }
        },
        "i8" | "i16" => Sql::constant(int(value, path)?.to_string(), Some("smallint")),
        "i32" => Sql::constant(int(value, path)?.to_string(), Some("integer")),
        "i64" => Sql::constant(int(value, path)?.to_string(), Some("bigint")),
        "fp32" | "fp64" => {
            let ty = if kind == "fp32" { "real" } else { "double precision" };
            float_literal(value, ty, path)?
        }
        "string" | "fixedChar" => {
            Sql::constant(string_literal(text(value, path)?, path)?, Some("text"))
        }
        "varChar" => {
            let var_char = object(value, path)?;
            let value_path = format!("{path}.value");
            let value = match get(var_char, "value") {
                Some(value) => text(value, &value_path)?,
                None => "",
            };
            Sql::constant(string_literal(value, &value_path)?, Some("text"))
        }
        "binary" | "fixedBinary" => {
            let bytes = base64(text(value, path)?, path)?;
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            Sql::constant(format!("decode('{hex}', 'hex')"), None)
        }
        "uuid" => {
            let bytes = base64(text(value, path)?, path)?;
            if bytes.len() != 16 {
                return Err(invalid(path, format!("a uuid has 16 bytes, found {}", bytes.len())));
            }
            let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            let (a, rest) = hex.split_at(8);
            let (b, rest) = rest.split_at(4);
            let (c, rest) = rest.split_at(4);
            let (d, e) = rest.split_at(4);
            Sql::constant(format!("UUID '{a}-{b}-{c}-{d}-{e}'"), None)
        }
        "date" => {
            let days = int(value, path)?;
            if i32::try_from(days).is_err() {
                return Err(invalid(path, format!("date {days} is out of range")));
            }
            Sql::constant(format!("DATE '{}'", date_text(days)), None)
        }
        "time" => Sql::constant(format!("TIME '{}'", time_of_day(int(value, path)?, path)?), None),
        "precisionTime" => {
            let micros = precision_value(value, path)?;
            Sql::constant(format!("TIME '{}'", time_of_day(micros, path)?), None)
        }
        "timestamp" => {
            Sql::constant(format!("TIMESTAMP '{}'", timestamp_text(int(value, path)?)), None)
        }
        "precisionTimestamp" => {
            let micros = precision_value(value, path)?;
            Sql::constant(format!("TIMESTAMP '{}'", timestamp_text(micros)), None)
        }
        "timestampTz" => {
            Sql::constant(format!("TIMESTAMPTZ '{}'", timestamp_tz_text(int(value, path)?)), None)
        }
        "precisionTimestampTz" => {
            let micros = precision_value(value, path)?;
            Sql::constant(format!("TIMESTAMPTZ '{}'", timestamp_tz_text(micros)), None)
        }
        "intervalYearToMonth" => {
            let interval = object(value, path)?;
            let years = opt_int(interval, "years", path)?.unwrap_or(0);
            let months = opt_int(interval, "months", path)?.unwrap_or(0);
            interval_literal(&[(years, "years"), (months, "months")])
        }
        "intervalDayToSecond" => {
            let interval = object(value, path)?;
            let days = opt_int(interval, "days", path)?.unwrap_or(0);
            let seconds = opt_int(interval, "seconds", path)?.unwrap_or(0);
            let micros = match opt_int(interval, "precision", path)? {
                Some(precision) => {
                    let subseconds = opt_int(interval, "subseconds", path)?.unwrap_or(0);
                    to_micros(subseconds, precision, &format!("{path}.precision"))?
                }
                None => opt_int(interval, "microseconds", path)?.unwrap_or(0),
            };
            interval_literal(&[(days, "days"), (seconds, "seconds"), (micros, "microseconds")])
        }
        "decimal" => {
            let decimal = object(value, path)?;
            let value_path = format!("{path}.value");
            let bytes = base64(text(required(decimal, "value", path)?, &value_path)?, &value_path)?;
            if bytes.is_empty() || bytes.len() > 16 {
                return Err(invalid(
                    &value_path,
                    format!("a decimal has 16 bytes, found {}", bytes.len()),
                ));
            }
            let scale = opt_int(decimal, "scale", path)?.unwrap_or(0);
            let Ok(scale @ 0..=38) = u32::try_from(scale) else {
                return Err(invalid(
                    &format!("{path}.scale"),
                    format!("scale {scale} is out of range (0 to 38)"),
                ));
            };
            Sql::constant(decimal_text(le_i128(&bytes), scale), Some("numeric"))
        }
        "null" => Sql::constant(format!("CAST(NULL AS {})", pg_type(value, path)?), None),
        _ => return Err(invalid(path, "unsupported literal")),
    })
}

fn float_literal(value: &Value, ty: &'static str, path: &str) -> Result<Sql> {
    let number = match value {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "NaN" => Some(f64::NAN),
            "Infinity" => Some(f64::INFINITY),
            "-Infinity" => Some(f64::NEG_INFINITY),
            other => other.trim().parse::<f64>().ok(),
        },
        _ => None,
    };
    let Some(number) = number else {
        return Err(invalid(path, format!("expected a number, found {}", describe(value))));
    };
    Ok(if number.is_nan() {
        Sql::constant(format!("CAST('NaN' AS {ty})"), None)
    } else if number.is_infinite() {
        let sign = if number < 0.0 { "-" } else { "" };
        Sql::constant(format!("CAST('{sign}Infinity' AS {ty})"), None)
    } else {
        Sql::constant(format!("{number:?}"), Some(ty))
    })
}

fn interval_literal(parts: &[(i64, &str)]) -> Sql {
    let text: Vec<String> =
        parts.iter().filter(|(n, _)| *n != 0).map(|(n, unit)| format!("{n} {unit}")).collect();
    let text = if text.is_empty() { "0 seconds".to_owned() } else { text.join(" ") };
    Sql::constant(format!("INTERVAL '{text}'"), None)
}

/// A `{precision, value}` time or timestamp, in microseconds.
fn precision_value(value: &Value, path: &str) -> Result<i64> {
    let value = object(value, path)?;
    let precision = opt_int(value, "precision", path)?.unwrap_or(0);
    let amount = opt_int(value, "value", path)?.unwrap_or(0);
    to_micros(amount, precision, &format!("{path}.precision"))
}

/// An amount in units of 10^-precision seconds, in microseconds (finer units truncated, as
/// PostgreSQL keeps microseconds).
fn to_micros(amount: i64, precision: i64, path: &str) -> Result<i64> {
    match precision {
        0..=6 => {
            let factor = 10_i64.pow(u32::try_from(6 - precision).unwrap_or(0));
            amount.checked_mul(factor).ok_or_else(|| invalid(path, "the value is out of range"))
        }
        7..=12 => Ok(amount.div_euclid(10_i64.pow(u32::try_from(precision - 6).unwrap_or(0)))),
        _ => Err(invalid(path, format!("precision {precision} is out of range (0 to 12)"))),
    }
}

/// Days since 1970-01-01 as a (proleptic Gregorian) year, month and day.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// A date as PostgreSQL reads it (`BC` for years before 1).
pub(super) fn date_text(days: i64) -> String {
    let (year, month, day) = civil_from_days(days);
    if year <= 0 {
        format!("{:04}-{month:02}-{day:02} BC", 1 - year)
    } else {
        format!("{year:04}-{month:02}-{day:02}")
    }
}

const MICROS_PER_DAY: i64 = 86_400_000_000;

fn clock_text(micros: i64) -> String {
    let seconds = micros / 1_000_000;
    let fraction = micros % 1_000_000;
    let clock = format!("{:02}:{:02}:{:02}", seconds / 3600, seconds / 60 % 60, seconds % 60);
    if fraction == 0 {
        clock
    } else {
        format!("{clock}.{}", format!("{fraction:06}").trim_end_matches('0'))
    }
}

fn time_of_day(micros: i64, path: &str) -> Result<String> {
    if !(0..=MICROS_PER_DAY).contains(&micros) {
        return Err(invalid(path, format!("time {micros} is not within a day")));
    }
    Ok(clock_text(micros))
}

pub(super) fn timestamp_text(micros: i64) -> String {
    let clock = clock_text(micros.rem_euclid(MICROS_PER_DAY));
    let date = date_text(micros.div_euclid(MICROS_PER_DAY));
    match date.strip_suffix(" BC") {
        Some(date) => format!("{date} {clock} BC"),
        None => format!("{date} {clock}"),
    }
}

fn timestamp_tz_text(micros: i64) -> String {
    let clock = clock_text(micros.rem_euclid(MICROS_PER_DAY));
    let date = date_text(micros.div_euclid(MICROS_PER_DAY));
    match date.strip_suffix(" BC") {
        Some(date) => format!("{date} {clock}+00 BC"),
        None => format!("{date} {clock}+00"),
    }
}

/// A little-endian two's-complement integer of up to 16 bytes.
pub(super) fn le_i128(bytes: &[u8]) -> i128 {
    let negative = bytes.last().is_some_and(|b| b & 0x80 != 0);
    let mut buffer = [if negative { 0xff } else { 0 }; 16];
    for (slot, byte) in buffer.iter_mut().zip(bytes) {
        *slot = *byte;
    }
    i128::from_le_bytes(buffer)
}

pub(super) fn decimal_text(value: i128, scale: u32) -> String {
    let digits = value.unsigned_abs().to_string();
    let sign = if value < 0 { "-" } else { "" };
    let scale = scale as usize;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let digits = if digits.len() <= scale {
        format!("{}{digits}", "0".repeat(scale + 1 - digits.len()))
    } else {
        digits
    };
    let (whole, fraction) = digits.split_at(digits.len() - scale);
    format!("{sign}{whole}.{fraction}")
}

/// Standard or URL-safe base64, padded or not (as proto3 JSON writes bytes).
pub(super) fn base64(text: &str, path: &str) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let mut buffer: u32 = 0;
    let mut bits = 0;
    for c in text.trim_end_matches('=').bytes() {
        let value = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return Err(invalid(path, "not valid base64")),
        };
        buffer = (buffer << 6) | u32::from(value);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push(((buffer >> bits) & 0xff) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Ok(out)
}

/// A Substrait type as a PostgreSQL type name.
pub(super) fn pg_type(ty: &Value, path: &str) -> Result<String> {
    let (kind, body) = oneof(object(ty, path)?, path, &[], "a type")?;
    let path = format!("{path}.{kind}");
    let parameter = |key: &str| -> Result<Option<i64>> {
        match body.as_object() {
            Some(body) => opt_int(body, key, &path),
            None => Ok(None),
        }
    };
    Ok(match kind.as_str() {
        "bool" => "boolean".to_owned(),
        "i8" | "i16" => "smallint".to_owned(),
        "i32" => "integer".to_owned(),
        "i64" => "bigint".to_owned(),
        "fp32" => "real".to_owned(),
        "fp64" => "double precision".to_owned(),
        "string" => "text".to_owned(),
        "binary" | "fixedBinary" => "bytea".to_owned(),
        "date" => "date".to_owned(),
        "time" => "time".to_owned(),
        "timestamp" => "timestamp".to_owned(),
        "timestampTz" => "timestamptz".to_owned(),
        "intervalYear" | "intervalDay" | "intervalCompound" => "interval".to_owned(),
        "uuid" => "uuid".to_owned(),
        "varchar" | "fixedChar" => {
            let name = if kind == "varchar" { "varchar" } else { "char" };
            match parameter("length")? {
                Some(length) if length > 0 => format!("{name}({length})"),
                _ => name.to_owned(),
            }
        }
        "decimal" => match (parameter("precision")?, parameter("scale")?.unwrap_or(0)) {
            (Some(precision @ 1..=1000), scale @ 0..=1000) => {
                format!("numeric({precision},{scale})")
            }
            _ => "numeric".to_owned(),
        },
        "precisionTime" | "precisionTimestamp" | "precisionTimestampTz" => {
            let name = match kind.as_str() {
                "precisionTime" => "time",
                "precisionTimestamp" => "timestamp",
                _ => "timestamptz",
            };
            let precision = parameter("precision")?.unwrap_or(6).clamp(0, 6);
            format!("{name}({precision})")
        }
        "list" => {
            let element_path = format!("{path}.type");
            let element = body
                .as_object()
                .and_then(|list| get(list, "type"))
                .ok_or_else(|| invalid(&element_path, "missing"))?;
            format!("{}[]", pg_type(element, &element_path)?)
        }
        _ => return Err(invalid(&path, "unsupported type")),
    })
}
