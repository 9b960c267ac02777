//! `config.json` of a dense Qwen3 checkpoint, in both spellings found in the wild:
//! transformers 4.x (`rope_theta`, `torch_dtype`) and 5.x (`rope_parameters.rope_theta`, `dtype`).
//! Unsupported configurations are rejected here, once, so the forward pass never branches on them.

use crate::error::{Error, Result};
use crate::limits::{printable, MAX_HEADS, MAX_LAYERS, MAX_POSITIONS, MAX_VOCAB, MAX_WIDTH};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The fields the forward pass needs, named as in Hugging Face's `Qwen3Config`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Qwen3Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    /// Read from the file, never derived from `hidden_size / num_attention_heads`.
    pub head_dim: usize,
    pub max_position_embeddings: usize,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub tie_word_embeddings: bool,
    /// `bos`/`eos` ids from the config, if any (generation stops on EOS unless told otherwise).
    #[serde(default)]
    pub eos_token_ids: Vec<u32>,
}

/// Longest head the attention kernel accepts (it keeps one head's accumulator in registers).
pub use crate::gpu::kernels::MAX_HEAD_DIM;

impl Qwen3Config {
    pub fn from_json(text: &str) -> Result<Self> {
        let v = super::json::parse_unique(text.as_bytes())
            .map_err(|e| Error::Json { path: "config.json".into(), message: e.to_string() })?;
        let obj = v.as_object().ok_or_else(|| Error::Config("expected a JSON object".into()))?;
        // Optional fields: absent or null mean the default; any other type is an error, not a default.
        let optional = |name: &str| obj.get(name).filter(|x| !x.is_null());
        let wrong = |name: &str, expected: &str, x: &Value| {
            Error::Config(format!("{name} must be {expected}, found {}", shown(x)))
        };
        let string_field = |name: &str| -> Result<Option<&str>> {
            optional(name).map(|x| x.as_str().ok_or_else(|| wrong(name, "a string", x))).transpose()
        };
        let bool_field = |name: &str| -> Result<Option<bool>> {
            optional(name).map(|x| x.as_bool().ok_or_else(|| wrong(name, "true or false", x))).transpose()
        };
        let usize_field = |name: &str, default: Option<usize>, max: usize| -> Result<usize> {
            let Some(x) = optional(name) else {
                return default.ok_or_else(|| Error::Config(format!("{name} is missing")));
            };
            let n = x.as_u64().ok_or_else(|| wrong(name, "a non-negative integer", x))?;
            match usize::try_from(n) {
                Ok(n) if n <= max => Ok(n),
                _ => Err(Error::Config(format!("{name} = {n} is above the limit of {max}"))),
            }
        };
        let f64_field = |x: &Value, name: &str| -> Result<f64> { x.as_f64().ok_or_else(|| wrong(name, "a number", x)) };
        if let Some(t) = string_field("model_type")? {
            if t != "qwen3" {
                return Err(Error::Config(format!(
                    "model_type is \"{}\"; only dense \"qwen3\" is supported",
                    printable(t)
                )));
            }
        }
        let num_attention_heads = usize_field("num_attention_heads", None, MAX_HEADS)?;
        // transformers' Qwen3Config defaults, where a field may be absent.
        let rope_theta = match (optional("rope_theta"), optional("rope_parameters")) {
            (Some(x), _) => f64_field(x, "rope_theta")?,
            (None, Some(p)) => {
                let p = p.as_object().ok_or_else(|| wrong("rope_parameters", "an object", p))?;
                match p.get("rope_type").filter(|x| !x.is_null()) {
                    None => {}
                    Some(Value::String(kind)) if kind == "default" => {}
                    Some(Value::String(kind)) => {
                        return Err(Error::Config(format!(
                            "rope_parameters.rope_type \"{}\" is not supported (only \"default\")",
                            printable(kind)
                        )));
                    }
                    Some(x) => return Err(wrong("rope_parameters.rope_type", "a string", x)),
                }
                match p.get("rope_theta").filter(|x| !x.is_null()) {
                    Some(x) => f64_field(x, "rope_parameters.rope_theta")?,
                    None => 10_000.0,
                }
            }
            (None, None) => 10_000.0,
        };
        if optional("rope_scaling").is_some() {
            return Err(Error::Config("rope_scaling is not supported".into()));
        }
        if bool_field("attention_bias")? == Some(true) {
            return Err(Error::Config("attention_bias = true is not supported".into()));
        }
        if let Some(act) = string_field("hidden_act")? {
            if act != "silu" {
                let act = printable(act);
                return Err(Error::Config(format!("hidden_act \"{act}\" is not supported (only silu)")));
            }
        }
        let token_id = |x: &Value| -> Result<u32> {
            x.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| wrong("eos_token_id", "a token id (0 to 4294967295) or a list of them", x))
        };
        let eos_token_ids = match optional("eos_token_id") {
            None => Vec::new(),
            Some(Value::Array(ids)) => ids.iter().map(token_id).collect::<Result<_>>()?,
            Some(x) => vec![token_id(x)?],
        };
        let cfg = Qwen3Config {
            vocab_size: usize_field("vocab_size", None, MAX_VOCAB)?,
            hidden_size: usize_field("hidden_size", None, MAX_WIDTH)?,
            intermediate_size: usize_field("intermediate_size", None, MAX_WIDTH)?,
            num_hidden_layers: usize_field("num_hidden_layers", None, MAX_LAYERS)?,
            num_attention_heads,
            num_key_value_heads: usize_field("num_key_value_heads", Some(num_attention_heads), MAX_HEADS)?,
            head_dim: usize_field("head_dim", Some(128), MAX_HEAD_DIM)?,
            max_position_embeddings: usize_field("max_position_embeddings", Some(32_768), MAX_POSITIONS)?,
            rms_norm_eps: match optional("rms_norm_eps") {
                Some(x) => f64_field(x, "rms_norm_eps")?,
                None => 1e-6,
            },
            rope_theta,
            tie_word_embeddings: bool_field("tie_word_embeddings")?.unwrap_or(false),
            eos_token_ids,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// Rejects shapes the kernels cannot run, and sizes past [`crate::limits`], with the reason.
    pub fn validate(&self) -> Result<()> {
        let bounded = [
            ("vocab_size", self.vocab_size, MAX_VOCAB),
            ("hidden_size", self.hidden_size, MAX_WIDTH),
            ("intermediate_size", self.intermediate_size, MAX_WIDTH),
            ("num_hidden_layers", self.num_hidden_layers, MAX_LAYERS),
            ("num_attention_heads", self.num_attention_heads, MAX_HEADS),
            ("num_key_value_heads", self.num_key_value_heads, MAX_HEADS),
            ("head_dim", self.head_dim, MAX_HEAD_DIM),
            ("max_position_embeddings", self.max_position_embeddings, MAX_POSITIONS),
        ];
        for (name, value, max) in bounded {
            if value == 0 {
                return Err(Error::Config(format!("{name} must be positive")));
            }
            if value > max {
                return Err(Error::Config(format!("{name} = {value} is above the limit of {max}")));
            }
        }
        if !self.num_attention_heads.is_multiple_of(self.num_key_value_heads) {
            return Err(Error::Config(format!(
                "num_attention_heads ({}) must be a multiple of num_key_value_heads ({})",
                self.num_attention_heads, self.num_key_value_heads
            )));
        }
        // The attention kernels read heads as vec4 (every published Qwen3 has head_dim 128).
        if !self.head_dim.is_multiple_of(4) {
            return Err(Error::Config(format!(
                "head_dim {} is not supported (must be a multiple of 4 and at most {MAX_HEAD_DIM})",
                self.head_dim
            )));
        }
        // Matmul kernels stream 8 bf16 weights per load: every reduction length must be a multiple of 8.
        for (name, k) in [
            ("hidden_size", self.hidden_size),
            ("intermediate_size", self.intermediate_size),
            ("num_attention_heads * head_dim", self.q_dim()),
        ] {
            if !k.is_multiple_of(8) {
                return Err(Error::Config(format!("{name} = {k} is not supported (must be a multiple of 8)")));
            }
        }
        if !(self.rms_norm_eps.is_finite() && self.rms_norm_eps > 0.0) {
            return Err(Error::Config("rms_norm_eps must be a positive number".into()));
        }
        if !(self.rope_theta.is_finite() && self.rope_theta > 1.0) {
            return Err(Error::Config("rope_theta must be a number greater than 1".into()));
        }
        Ok(())
    }

    /// Width of the attention output: `num_attention_heads * head_dim` (not necessarily `hidden_size`).
    pub fn q_dim(&self) -> usize {
        self.num_attention_heads * self.head_dim
    }

    pub fn kv_dim(&self) -> usize {
        self.num_key_value_heads * self.head_dim
    }

    /// Parameters read per decoded token: every matmul plus the lm_head (the embedding gather is one row).
    pub fn params_per_token(&self) -> u64 {
        let h = self.hidden_size as u64;
        let per_layer = h * (self.q_dim() + 2 * self.kv_dim()) as u64
            + self.q_dim() as u64 * h
            + 3 * h * self.intermediate_size as u64;
        per_layer * self.num_hidden_layers as u64 + self.vocab_size as u64 * h
    }

    /// The published shapes of the Qwen3 family, for synthetic (random-weight) models.
    pub fn preset(name: &str) -> Option<Self> {
        let (hidden, inter, layers, heads, kv, tie) = match name {
            "qwen3-0.6b" => (1024, 3072, 28, 16, 8, true),
            "qwen3-1.7b" => (2048, 6144, 28, 16, 8, true),
            "qwen3-4b" => (2560, 9728, 36, 32, 8, true),
            "qwen3-8b" => (4096, 12288, 36, 32, 8, false),
            // The app's embedded default: the real vocabulary on a small body.
            "tiny" => return Some(crate::model::synthetic::SyntheticModel::embedded_default().config),
            _ => return None,
        };
        Some(Qwen3Config {
            vocab_size: 151_936,
            hidden_size: hidden,
            intermediate_size: inter,
            num_hidden_layers: layers,
            num_attention_heads: heads,
            num_key_value_heads: kv,
            head_dim: 128,
            max_position_embeddings: 40_960,
            rms_norm_eps: 1e-6,
            rope_theta: 1_000_000.0,
            tie_word_embeddings: tie,
            eos_token_ids: vec![151_645, 151_643],
        })
    }

    pub const PRESETS: [&'static str; 5] = ["tiny", "qwen3-0.6b", "qwen3-1.7b", "qwen3-4b", "qwen3-8b"];
}

/// A value from the file for a message: at most 60 characters of its JSON.
fn shown(x: &Value) -> String {
    let text = x.to_string();
    match text.char_indices().nth(60) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// RoPE inverse frequencies, computed as transformers does: 1 / theta^(2d / head_dim) in f32
/// (the GPU's table and the CPU reference's, one definition).
pub fn inv_freq(head_dim: usize, theta: f64) -> Vec<f32> {
    (0..head_dim / 2).map(|d| 1.0 / (theta as f32).powf((2 * d) as f32 / head_dim as f32)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_agree() {
        let v4 = r#"{"model_type":"qwen3","vocab_size":100,"hidden_size":64,"intermediate_size":128,
            "num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":24,
            "max_position_embeddings":512,"rms_norm_eps":1e-6,"rope_theta":1000000,"torch_dtype":"bfloat16",
            "tie_word_embeddings":true}"#;
        let v5 = v4
            .replace(r#""rope_theta":1000000"#, r#""rope_parameters":{"rope_theta":1000000.0,"rope_type":"default"}"#)
            .replace("torch_dtype", "dtype");
        let a = Qwen3Config::from_json(v4).unwrap();
        let b = Qwen3Config::from_json(&v5).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.rope_theta, 1e6);
        assert_eq!(a.head_dim, 24);
    }

    #[test]
    fn rejects_what_kernels_cannot_run() {
        let base = r#"{"vocab_size":100,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
            "num_attention_heads":4,"num_key_value_heads":3,"head_dim":24}"#;
        let e = Qwen3Config::from_json(base).unwrap_err().to_string();
        assert!(e.contains("multiple of num_key_value_heads"), "{e}");
        let e = Qwen3Config::from_json("{not json").unwrap_err().to_string();
        assert!(e.contains("invalid JSON"), "{e}");
        let e = Qwen3Config::from_json(r#"{"model_type":"llama"}"#).unwrap_err().to_string();
        assert!(e.contains("qwen3"), "{e}");
    }

    #[test]
    fn sizes_past_the_limits_and_wrong_types_are_errors() {
        let base = r#"{"vocab_size":100,"hidden_size":64,"intermediate_size":128,"num_hidden_layers":2,
            "num_attention_heads":4,"num_key_value_heads":2,"head_dim":24"#;
        let with = |extra: &str| Qwen3Config::from_json(&format!("{base},{extra}}}"));
        assert_eq!(with(r#""eos_token_id":[7,8]"#).unwrap().eos_token_ids, vec![7, 8]);
        assert!(with(r#""eos_token_id":null,"rope_scaling":null,"hidden_act":null"#).is_ok());
        for (extra, want) in [
            (r#""max_position_embeddings":2147483648"#, "max_position_embeddings = 2147483648 is above the limit of"),
            (r#""max_position_embeddings":1048577"#, "max_position_embeddings = 1048577 is above the limit of 1048576"),
            (r#""eos_token_id":1099511627776"#, "eos_token_id must be a token id"),
            (r#""tie_word_embeddings":"true""#, "tie_word_embeddings must be true or false"),
            (r#""rope_parameters":{"rope_type":3}"#, "rope_parameters.rope_type must be a string"),
            (r#""model_type":"a\nb""#, r#"model_type is "a\nb""#),
            (r#""head_dim":8"#, r#"duplicate key "head_dim""#),
        ] {
            let e = with(extra).unwrap_err().to_string();
            assert!(e.contains(want), "{extra}: {e}");
        }
    }
}
