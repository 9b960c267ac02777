//! How matrices are laid out on the GPU: the checkpoint's bf16, or int8 / int4 (made at load by
//! `model::quant`, which documents the row layout). The GPU layer owns the format because the
//! kernels decode it (the weights blocks of shaders/, [`crate::gpu::kernels`]).

/// How the matrices are stored on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightFormat {
    /// As the checkpoint stores them: 2 bytes per weight.
    #[default]
    Bf16,
    /// 1 byte per weight + a scale per row.
    Int8,
    /// Half a byte per weight + a bf16 scale per 32 weights (4.5 bits per weight).
    Int4,
}

/// Columns of a row sharing one int4 scale.
pub const INT4_GROUP: usize = 32;

impl WeightFormat {
    pub const ALL: [WeightFormat; 3] = [WeightFormat::Bf16, WeightFormat::Int8, WeightFormat::Int4];

    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Int8 => "int8",
            WeightFormat::Int4 => "int4",
        }
    }

    /// Parses "bf16", "int8" or "int4".
    pub fn parse(s: &str) -> Option<WeightFormat> {
        WeightFormat::ALL.into_iter().find(|f| f.name() == s.trim().to_ascii_lowercase())
    }

    /// 32-bit words per texel.
    pub fn texel_words(self) -> usize {
        match self {
            WeightFormat::Bf16 | WeightFormat::Int8 => 4,
            WeightFormat::Int4 => 2,
        }
    }

    /// Weights per texel: 8 for bf16 (a kernel's `weights()` load), 16 for int8 and int4, whose
    /// texel holds what the kernels' paired load `weights16()` takes in one fetch (a texel fetch
    /// costs lavapipe the same at any width; `weights()` takes half of one).
    pub fn texel_weights(self) -> usize {
        match self {
            WeightFormat::Bf16 => 8,
            WeightFormat::Int8 | WeightFormat::Int4 => 16,
        }
    }

    /// Texels before a row's weights (its scales): int8's one scale, int4's bf16 scales four a
    /// texel (one per group of 32 weights).
    pub fn header_texels(self, cols: usize) -> usize {
        match self {
            WeightFormat::Bf16 => 0,
            WeightFormat::Int8 => 1,
            WeightFormat::Int4 => cols.div_ceil(4 * INT4_GROUP),
        }
    }

    /// Texels per row (`cols` is a multiple of 8; an int8 or int4 row of 16n + 8 ends in 8 zero
    /// weights).
    pub fn row_texels(self, cols: usize) -> usize {
        self.header_texels(cols) + cols.div_ceil(self.texel_weights())
    }

    /// Bytes per row on the GPU, scales included.
    pub fn row_bytes(self, cols: usize) -> usize {
        self.row_texels(cols) * self.texel_words() * 4
    }

    /// The texture format whose texel is [`Self::texel_words`] words.
    pub fn texture_format(self) -> wgpu::TextureFormat {
        match self {
            WeightFormat::Bf16 | WeightFormat::Int8 => wgpu::TextureFormat::Rgba32Uint,
            WeightFormat::Int4 => wgpu::TextureFormat::Rg32Uint,
        }
    }
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for WeightFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        WeightFormat::parse(s).ok_or_else(|| {
            format!("unknown weight format {:?}: expected bf16, int8 or int4", crate::limits::printable(s))
        })
    }
}

/// Where matmul weights live. CPU adapters (lavapipe) read `rgba32uint` textures ~12% faster than
/// storage buffers (Mesa turns each storage load into a loop over the SIMD lanes; a texel fetch is
/// a gather); GPUs and the browser keep buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightStorage {
    Buffer,
    Texture,
}

impl WeightStorage {
    /// Textures on native CPU adapters, buffers elsewhere.
    pub fn for_adapter(info: &wgpu::AdapterInfo) -> WeightStorage {
        if cfg!(not(target_arch = "wasm32")) && info.device_type == wgpu::DeviceType::Cpu {
            WeightStorage::Texture
        } else {
            WeightStorage::Buffer
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            WeightStorage::Buffer => "buffer",
            WeightStorage::Texture => "texture",
        }
    }
}

impl std::str::FromStr for WeightStorage {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "buffer" => Ok(WeightStorage::Buffer),
            "texture" => Ok(WeightStorage::Texture),
            other => {
                Err(format!("unknown weight storage {:?}: expected buffer or texture", crate::limits::printable(other)))
            }
        }
    }
}
