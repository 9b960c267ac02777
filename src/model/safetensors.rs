//! Validated parsing of a safetensors header. Nothing in a file is trusted: the header length is
//! checked against the file size, every tensor's byte range against the data section and against
//! the others, and every dtype and shape against its byte count — before any tensor is read.
//!
//! Layout: `u64 LE n`, `n` bytes of JSON `{name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {..}}`,
//! then the data section; offsets are relative to the data section.

use crate::error::{Error, Result};
use crate::limits;
use serde_json::Value;
use std::collections::BTreeMap;

pub use crate::limits::SAFETENSORS_HEADER_MAX_BYTES as MAX_HEADER_BYTES;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    Bf16,
    F16,
    F32,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::Bf16 | Dtype::F16 => 2,
            Dtype::F32 => 4,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dtype::Bf16 => "BF16",
            Dtype::F16 => "F16",
            Dtype::F32 => "F32",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct TensorInfo {
    pub dtype: Dtype,
    pub shape: Vec<usize>,
    /// Absolute byte range in the file.
    pub begin: u64,
    pub end: u64,
}

impl TensorInfo {
    pub fn len_bytes(&self) -> u64 {
        self.end - self.begin
    }
    /// Elements; cannot overflow, since the header's byte count was checked against the shape.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

#[derive(Debug, Clone)]
pub struct Header {
    pub tensors: BTreeMap<String, TensorInfo>,
}

/// Length of the JSON header from the first 8 bytes, checked against the file size.
pub fn header_len(file: &str, first8: &[u8], file_len: u64) -> Result<u64> {
    let bad = |message: String| Error::Safetensors { file: file.into(), message };
    if file_len < 8 || first8.len() < 8 {
        return Err(bad(format!("file is {file_len} bytes, shorter than the 8-byte header length")));
    }
    let n = u64::from_le_bytes(first8[..8].try_into().expect("8 bytes"));
    if n > MAX_HEADER_BYTES {
        return Err(bad(format!("header length {n} exceeds the {MAX_HEADER_BYTES}-byte limit")));
    }
    if 8 + n > file_len {
        return Err(bad(format!(
            "header length {n} runs past the end of the file ({file_len} bytes): truncated or not safetensors"
        )));
    }
    Ok(n)
}

/// Parses and validates the JSON header. `file_len` is the whole file's size.
pub fn parse_header(file: &str, json: &[u8], file_len: u64) -> Result<Header> {
    let bad = |message: String| Error::Safetensors { file: file.into(), message };
    let data_start = 8 + json.len() as u64;
    let data_len =
        file_len.checked_sub(data_start).ok_or_else(|| bad("header runs past the end of the file".into()))?;
    let v = super::json::parse_unique(json).map_err(|e| bad(format!("header is not valid JSON: {e}")))?;
    let obj = v.as_object().ok_or_else(|| bad("header is not a JSON object".into()))?;
    let mut tensors = BTreeMap::new();
    for (key, entry) in obj {
        if key == "__metadata__" {
            continue;
        }
        // The name as messages show it: a header's keys may hold line breaks or be huge.
        let name = limits::printable(key);
        let dtype_name =
            entry.get("dtype").and_then(Value::as_str).ok_or_else(|| bad(format!("tensor {name}: missing dtype")))?;
        let dtype = match dtype_name {
            "BF16" => Dtype::Bf16,
            "F16" => Dtype::F16,
            "F32" => Dtype::F32,
            other => {
                return Err(Error::Dtype { file: file.into(), tensor: name, dtype: limits::printable(other) });
            }
        };
        let shape: Vec<usize> = entry
            .get("shape")
            .and_then(Value::as_array)
            .ok_or_else(|| bad(format!("tensor {name}: missing shape")))?
            .iter()
            .map(|d| d.as_u64().and_then(|d| usize::try_from(d).ok()))
            .collect::<Option<_>>()
            .ok_or_else(|| bad(format!("tensor {name}: shape must be a list of non-negative integers")))?;
        if shape.len() > limits::MAX_TENSOR_RANK {
            return Err(bad(format!(
                "tensor {name}: {} dimensions, above the limit of {}",
                shape.len(),
                limits::MAX_TENSOR_RANK
            )));
        }
        let offsets: Vec<u64> = entry
            .get("data_offsets")
            .and_then(Value::as_array)
            .and_then(|a| a.iter().map(Value::as_u64).collect::<Option<_>>())
            .unwrap_or_default();
        let [begin, end] = offsets[..] else {
            return Err(bad(format!("tensor {name}: data_offsets must be [begin, end]")));
        };
        if begin > end || end > data_len {
            return Err(bad(format!(
                "tensor {name}: data_offsets [{begin}, {end}] lie outside the {data_len}-byte data section"
            )));
        }
        // Checked: a shape of [2^63] in 2-byte elements must not wrap to the 0 bytes it claims.
        let expected = shape
            .iter()
            .try_fold(dtype.size() as u64, |acc, &d| acc.checked_mul(d as u64))
            .ok_or_else(|| bad(format!("tensor {name}: shape {shape:?} overflows")))?;
        if expected != end - begin {
            return Err(bad(format!(
                "tensor {name}: shape {shape:?} of {} needs {expected} bytes but data_offsets give {}",
                dtype.name(),
                end - begin
            )));
        }
        tensors.insert(key.clone(), TensorInfo { dtype, shape, begin: data_start + begin, end: data_start + end });
    }
    let mut ranges: Vec<(&String, &TensorInfo)> = tensors.iter().filter(|(_, t)| t.end > t.begin).collect();
    ranges.sort_by_key(|(_, t)| t.begin);
    for pair in ranges.windows(2) {
        let ((a, ta), (b, tb)) = (pair[0], pair[1]);
        if tb.begin < ta.end {
            return Err(bad(format!("tensors {} and {} overlap", limits::printable(a), limits::printable(b))));
        }
    }
    Ok(Header { tensors })
}

/// A safetensors header checked from a file's first bytes as they arrive, so a download can stop
/// as soon as they show the file is not one (a wrong length, a header that does not parse),
/// before the data follows. `file_len`: the whole file's size when known.
#[derive(Debug)]
pub struct HeaderWatch {
    file: String,
    file_len: Option<u64>,
    /// The first bytes, up to the end of the header.
    prefix: Vec<u8>,
    /// The header's length, once the first 8 bytes are in.
    header: Option<u64>,
    checked: bool,
}

impl HeaderWatch {
    pub fn new(file: &str, file_len: Option<u64>) -> HeaderWatch {
        HeaderWatch { file: file.into(), file_len, prefix: Vec::new(), header: None, checked: false }
    }

    /// Whether the header has been read and found valid.
    pub fn checked(&self) -> bool {
        self.checked
    }

    /// Takes the next bytes of the file; `Err` as soon as they show it is not safetensors.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<()> {
        if self.checked {
            return Ok(());
        }
        // The file's length bounds the header's; unknown, only the limit does.
        let file_len = self.file_len.unwrap_or(u64::MAX);
        let wanted = 8 + self.header.unwrap_or(0);
        let take = (wanted.saturating_sub(self.prefix.len() as u64) as usize).min(chunk.len());
        self.prefix.extend_from_slice(&chunk[..take]);
        let rest = &chunk[take..];
        if self.header.is_none() && self.prefix.len() >= 8 {
            self.header = Some(header_len(&self.file, &self.prefix, file_len)?);
            return self.feed(rest);
        }
        if let Some(n) = self.header {
            if self.prefix.len() as u64 == 8 + n {
                parse_header(&self.file, &self.prefix[8..], file_len)?;
                self.checked = true;
                self.prefix = Vec::new();
            }
        }
        Ok(())
    }

    /// The end of the file: a file that ended inside its header is not safetensors.
    pub fn finish(&self) -> Result<()> {
        if self.checked {
            return Ok(());
        }
        let got = self.prefix.len();
        Err(Error::Safetensors {
            file: self.file.clone(),
            message: format!("the file ends after {got} bytes, inside its header: truncated or not safetensors"),
        })
    }
}

/// bf16 (the top half of an f32) from raw little-endian bytes of any supported dtype;
/// F16 and F32 are rounded to the nearest bf16 (ties to even).
pub fn to_bf16_bits(dtype: Dtype, bytes: &[u8]) -> Vec<u16> {
    match dtype {
        Dtype::Bf16 => bytes.chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect(),
        Dtype::F16 => {
            bytes.chunks_exact(2).map(|b| f32_to_bf16(f16_to_f32(u16::from_le_bytes([b[0], b[1]])))).collect()
        }
        Dtype::F32 => {
            bytes.chunks_exact(4).map(|b| f32_to_bf16(f32::from_le_bytes([b[0], b[1], b[2], b[3]]))).collect()
        }
    }
}

/// f32 values from raw little-endian bytes of any supported dtype (exact).
pub fn to_f32(dtype: Dtype, bytes: &[u8]) -> Vec<f32> {
    match dtype {
        Dtype::Bf16 => bytes.chunks_exact(2).map(|b| bf16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
        Dtype::F16 => bytes.chunks_exact(2).map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]]))).collect(),
        Dtype::F32 => bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect(),
    }
}

pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

pub fn f32_to_bf16(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let round = 0x7fff + ((bits >> 16) & 1);
    (bits.wrapping_add(round) >> 16) as u16
}

pub fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: renormalise.
            let shift = m.leading_zeros() - 21;
            let m = (m << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(header: &str, data_len: usize) -> Vec<u8> {
        let mut v = (header.len() as u64).to_le_bytes().to_vec();
        v.extend_from_slice(header.as_bytes());
        v.resize(v.len() + data_len, 0);
        v
    }

    fn parse(bytes: &[u8]) -> Result<Header> {
        let n = header_len("t", bytes, bytes.len() as u64)?;
        parse_header("t", &bytes[8..8 + n as usize], bytes.len() as u64)
    }

    #[test]
    fn accepts_a_valid_file() {
        let h = r#"{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},
                  "b":{"dtype":"F32","shape":[2],"data_offsets":[12,20]}}"#;
        let bytes = file_with(h, 20);
        let header = parse(&bytes).unwrap();
        assert_eq!(header.tensors["b"].begin, 8 + h.len() as u64 + 12);
    }

    #[test]
    fn rejects_lies() {
        let cases = [
            (r#"{"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]}}"#, 8, "outside"),
            (r#"{"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,10]}}"#, 12, "needs 12 bytes"),
            (r#"{"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}}"#, 8, "unsupported dtype I64"),
            (
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
                12,
                "overlap",
            ),
            (r#"{"a":"#, 0, "not valid JSON"),
            (r#"{"a":{"dtype":"BF16","shape":[9223372036854775808],"data_offsets":[0,0]}}"#, 0, "overflows"),
            (r#"{"a":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}}"#, 0, "overflows"),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
                8,
                "duplicate key \"a\"",
            ),
        ];
        for (h, data, want) in cases {
            let e = parse(&file_with(h, data)).unwrap_err().to_string();
            assert!(e.contains(want), "{h}: {e}");
        }
        let mut lying = file_with(r#"{}"#, 0);
        lying[0] = 200;
        assert!(parse(&lying).unwrap_err().to_string().contains("past the end"));
        assert!(parse(&[1, 2, 3]).unwrap_err().to_string().contains("shorter"));
    }

    #[test]
    fn conversions_round_trip() {
        for x in [0.0f32, 1.0, -2.5, 3.140625, 1e-3, 65504.0] {
            assert_eq!(bf16_to_f32(f32_to_bf16(x)), f32::from_bits(f32_to_bf16(x) as u32 * 65536));
        }
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(f32_to_bf16(1.0 + 2f32.powi(-8)), 0x3f80); // tie to even
    }
}
