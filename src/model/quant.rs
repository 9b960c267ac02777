//! Weight formats: the checkpoint's bf16, or int8 / int4 made from it at load (`--weights`).
//!
//! Every matrix of the model (q|k|v, o, gate|up, down, and the embedding table / lm_head) is
//! stored in the chosen format; norm weights stay f32. Quantisation is symmetric (no zero point),
//! round to nearest (halves away from zero), and every scale is a bf16 value, so that a quantised
//! weight times its scale is exact in f32: the GPU and the CPU reference ([`dequantise`]) see the
//! same numbers.
//!
//! - int8: one scale per row, `absmax / 127` (rounded to bf16); q in [-127, 127].
//! - int4: one scale per group of 32 columns of a row (the last group may be shorter), the group's
//!   largest-magnitude value `m` over -8 (rounded to bf16), so `m` itself becomes -8 and the whole
//!   range [-8, 7] is used; stored as q + 8 in a nibble.
//!
//! The layout of one row, in 32-bit words (a texture row holds the same words, in texels of
//! [`WeightFormat::texel_words`] words):
//! - bf16: `cols / 2` words, two bf16 each (element 2i in the low half);
//! - int8: a header texel `[scale as f32 bits, 0, 0, 0]`, then `cols / 4` words, weight 4j + e in
//!   byte e (two's complement), and two zero words where `cols` is an odd multiple of 8 (so the row
//!   is whole texels of 16 weights);
//! - int4: `ceil(cols / 64)` header words of bf16 scales (group 2t low half, 2t + 1 high half),
//!   padded to whole texels (two words: four scales), then `cols / 8` words, weight 8j + e in bits
//!   4e..4e + 3, and a zero word where `cols` is an odd multiple of 8.
//!
//! Non-finite weights do not stop a load (a bf16 model would carry them too): a non-finite value
//! is left out of its row's / group's scale and clamps to the end of the range (NaN to 0).

use super::safetensors::bf16_to_f32;

use crate::gpu::format::{WeightFormat, INT4_GROUP};

/// f32 to bf16 bits, round to nearest even (finite values).
fn to_bf16(v: f32) -> u16 {
    let bits = v.to_bits();
    ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
}

/// The scale that maps `reach` (the largest magnitude, signed for int4) to `levels`, as a bf16
/// value; 0 for an all-zero (or all non-finite) range.
fn scale(reach: f32, levels: f32) -> f32 {
    if reach == 0.0 {
        return 0.0;
    }
    bf16_to_f32(to_bf16(reach / levels))
}

/// `v / s` rounded to the nearest level in `[lo, hi]` (0 where s is 0).
fn level(v: f32, s: f32, lo: i32, hi: i32) -> i32 {
    if s == 0.0 {
        return 0;
    }
    ((v / s).round() as i32).clamp(lo, hi)
}

/// The value of largest magnitude among the finite ones (first on ties), 0 if none.
fn reach(values: impl Iterator<Item = f32>) -> f32 {
    values.filter(|v| v.is_finite()).fold(0.0, |best: f32, v| if v.abs() > best.abs() { v } else { best })
}

/// Rows of bf16 `bits` (`cols` wide, a multiple of 8) in `format`'s row layout, as words.
pub fn quantise(bits: &[u16], cols: usize, format: WeightFormat) -> Vec<u32> {
    assert!(cols.is_multiple_of(8) && bits.len().is_multiple_of(cols));
    let row_words = format.row_bytes(cols) / 4;
    let mut out = Vec::with_capacity(bits.len() / cols * row_words);
    for row in bits.chunks_exact(cols) {
        let values = || row.iter().map(|&b| bf16_to_f32(b));
        // Headers and rows are padded to whole texels.
        let end = out.len() + row_words;
        match format {
            WeightFormat::Bf16 => {
                out.extend(row.chunks_exact(2).map(|p| p[0] as u32 | (p[1] as u32) << 16));
            }
            WeightFormat::Int8 => {
                let s = scale(reach(values()).abs(), 127.0);
                out.extend([s.to_bits(), 0, 0, 0]);
                out.extend(row.chunks_exact(4).map(|four| {
                    four.iter().enumerate().fold(0u32, |word, (e, &b)| {
                        let q = level(bf16_to_f32(b), s, -127, 127) as i8 as u8;
                        word | (q as u32) << (8 * e)
                    })
                }));
            }
            WeightFormat::Int4 => {
                let header_end = out.len() + format.header_texels(cols) * format.texel_words();
                let scales: Vec<f32> =
                    row.chunks(INT4_GROUP).map(|g| scale(reach(g.iter().map(|&b| bf16_to_f32(b))), -8.0)).collect();
                out.extend(scales.chunks(2).map(|pair| {
                    let hi = pair.get(1).map_or(0, |s| to_bf16(*s) as u32);
                    to_bf16(pair[0]) as u32 | hi << 16
                }));
                out.resize(header_end, 0);
                out.extend(row.chunks_exact(8).enumerate().map(|(j, eight)| {
                    let s = scales[j * 8 / INT4_GROUP];
                    eight.iter().enumerate().fold(0u32, |word, (e, &b)| {
                        let q = (level(bf16_to_f32(b), s, -8, 7) + 8) as u32;
                        word | q << (4 * e)
                    })
                }));
            }
        }
        out.resize(end, 0);
    }
    out
}

/// The weights the kernels compute with, from [`quantise`]'s words: `rows x cols` f32.
pub fn dequantise_words(words: &[u32], cols: usize, format: WeightFormat) -> Vec<f32> {
    let row_words = format.row_bytes(cols) / 4;
    let header = format.header_texels(cols) * format.texel_words();
    // The row's weights, without the padding after them.
    let data_words = match format {
        WeightFormat::Bf16 => cols / 2,
        WeightFormat::Int8 => cols / 4,
        WeightFormat::Int4 => cols / 8,
    };
    let mut out = Vec::with_capacity(words.len() / row_words * cols);
    for row in words.chunks_exact(row_words) {
        let data = &row[header..header + data_words];
        match format {
            WeightFormat::Bf16 => {
                out.extend(data.iter().flat_map(|&w| [bf16_to_f32(w as u16), bf16_to_f32((w >> 16) as u16)]));
            }
            WeightFormat::Int8 => {
                let s = f32::from_bits(row[0]);
                out.extend(data.iter().flat_map(|&w| (0..4).map(move |e| ((w >> (8 * e)) as u8 as i8) as f32 * s)));
            }
            WeightFormat::Int4 => {
                for (j, &w) in data.iter().enumerate() {
                    let g = j * 8 / INT4_GROUP;
                    let s = bf16_to_f32((row[g / 2] >> (16 * (g % 2))) as u16);
                    out.extend((0..8).map(|e| (((w >> (4 * e)) & 15) as i32 - 8) as f32 * s));
                }
            }
        }
    }
    out
}

/// bf16 rows as the GPU will compute with them in `format` (the CPU reference's weights).
pub fn dequantise(bits: &[u16], cols: usize, format: WeightFormat) -> Vec<f32> {
    dequantise_words(&quantise(bits, cols, format), cols, format)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bits(values: &[f32]) -> Vec<u16> {
        values.iter().map(|&v| to_bf16(v)).collect()
    }

    #[test]
    fn bf16_round_trips_exactly() {
        let b = bits(&[1.0, -2.5, 0.0, 3.25e-3, 7.0, -1e5, 0.5, 0.125]);
        let back = dequantise(&b, 8, WeightFormat::Bf16);
        assert_eq!(back, b.iter().map(|&x| bf16_to_f32(x)).collect::<Vec<_>>());
    }

    #[test]
    fn int8_maps_the_row_maximum_to_127_and_rounds_to_the_nearest_level() {
        // Row max 1.27: scale 0.01 (as bf16), so 0.5 -> 50 levels, -1.27 -> -127.
        let b = bits(&[1.27, -1.27, 0.5, 0.0, 0.004, -0.006, 0.3, 1.0]);
        let words = quantise(&b, 8, WeightFormat::Int8);
        let s = f32::from_bits(words[0]);
        assert_eq!(s, bf16_to_f32(to_bf16(bf16_to_f32(b[0]) / 127.0)));
        assert_eq!(words.len(), 8, "a header texel and 8 weights padded to a texel of 16");
        let q: Vec<i8> = (0..8).map(|i| (words[4 + i / 4] >> (8 * (i % 4))) as u8 as i8).collect();
        assert_eq!(q[0], 127);
        assert_eq!(q[1], -127);
        assert_eq!(q[3], 0);
        let back = dequantise_words(&words, 8, WeightFormat::Int8);
        for (v, d) in b.iter().zip(&back) {
            assert!((bf16_to_f32(*v) - d).abs() <= s / 2.0 * 1.01 + 1e-7, "{} vs {d}", bf16_to_f32(*v));
        }
    }

    #[test]
    fn int4_uses_a_scale_per_group_of_32_and_the_whole_range() {
        // Two groups (and a short third one): values of very different size keep their own scale.
        let cols = 80;
        let values: Vec<f32> = (0..cols)
            .map(|c| {
                let size = [1.0, 1e-3, 50.0][c / 32];
                size * ((c % 7) as f32 - 3.0) / 3.0
            })
            .collect();
        let b = bits(&values);
        let words = quantise(&b, cols, WeightFormat::Int4);
        assert_eq!(words.len(), WeightFormat::Int4.row_bytes(cols) / 4);
        // Three scales, one texel of four (two words).
        assert_eq!(WeightFormat::Int4.header_texels(cols), 1);
        let back = dequantise_words(&words, cols, WeightFormat::Int4);
        // Within half a step (step = group max / 8), or a whole step at the end opposite the
        // extreme, which clamps to 7.
        for (c, (v, d)) in values.iter().zip(&back).enumerate() {
            let step = [1.0, 1e-3, 50.0][c / 32] / 8.0;
            let bound = if v.abs() / step > 7.5 { step } else { step / 2.0 };
            assert!((v - d).abs() <= bound * 1.02, "column {c}: {v} vs {d}");
        }
        // The largest-magnitude value of a group is exactly level -8.
        let nibble = |c: usize| (words[2 + c / 8] >> (4 * (c % 8))) & 15;
        let first_max = (0..32).max_by(|&a, &b| values[a].abs().total_cmp(&values[b].abs())).unwrap();
        let first_max = (0..32).find(|&c| values[c].abs() == values[first_max].abs()).unwrap();
        assert_eq!(nibble(first_max), 0);
        // Its scale is exactly that value over -8 (a power of two: exact in bf16), so it comes back
        // exactly: a scale off by any factor shows here, where the half-step bound above is loose.
        assert_eq!(back[first_max], bf16_to_f32(b[first_max]), "column {first_max}'s scale");
    }

    #[test]
    fn zero_and_non_finite_rows_quantise_without_panicking() {
        for format in WeightFormat::ALL {
            let zeros = dequantise(&[0; 32], 32, format);
            assert!(zeros.iter().all(|&v| v == 0.0), "{format}");
            let mut odd = bits(&[1.0; 32]);
            odd[3] = 0x7fc0; // NaN
            odd[5] = 0x7f80; // +inf
            let back = dequantise(&odd, 32, format);
            if format != WeightFormat::Bf16 {
                assert!(back.iter().all(|v| v.is_finite()), "{format}: {back:?}");
                assert!((back[0] - 1.0).abs() < 0.01, "{format}: the finite values keep their scale: {}", back[0]);
            }
        }
    }

    #[test]
    fn formats_parse_and_refuse_others() {
        for f in WeightFormat::ALL {
            assert_eq!(f.name().parse::<WeightFormat>(), Ok(f));
        }
        let err = "int2".parse::<WeightFormat>().unwrap_err();
        assert!(err.contains("int2") && err.contains("bf16, int8 or int4"), "{err}");
    }
}
