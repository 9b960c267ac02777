//! Uploading weights to the GPU, tensor by tensor and in row pieces, so a checkpoint is never
//! held whole in (wasm) memory. Matmul weights stay bf16, two per `u32`, or are quantised to int8 /
//! int4 as they are written ([`WeightFormat`], layouts in `model::quant`), in storage buffers or
//! (CPU adapters, see [`WeightStorage`]) textures of one texel per 8 weights (plus the scales);
//! norm weights become f32. A matrix larger than one binding (or texture) is split by rows into chunks.

use super::checkpoint::TensorProvider;
use super::quant;
use crate::error::{Error, Result};
use crate::gpu::fill::RandomFill;
use crate::gpu::WeightFormat;
use crate::gpu::{Gpu, WeightStorage};

/// Rows read from the source per piece (bounds host memory during upload).
const PIECE_BYTES: usize = 16 << 20;

/// Where one chunk's rows live.
pub enum ChunkStore {
    Buffer(wgpu::Buffer),
    /// `rows` texels high, `format.row_texels(cols)` wide; the view is what kernels bind.
    Texture(wgpu::Texture, wgpu::TextureView),
}

/// One row-range of a matrix, in its own buffer or texture.
pub struct Chunk {
    pub store: ChunkStore,
    pub row_start: usize,
    pub rows: usize,
}

/// The chunk as a kernel binding (a storage buffer or a sampled texture).
impl crate::gpu::kernels::Bind for Chunk {
    fn resource(&self) -> wgpu::BindingResource<'_> {
        match &self.store {
            ChunkStore::Buffer(buffer) => buffer.as_entire_binding(),
            ChunkStore::Texture(_, view) => wgpu::BindingResource::TextureView(view),
        }
    }
}

impl Chunk {
    /// Writes `bits` (whole rows, in `format`'s layout) from chunk row `row` on.
    fn write(&self, gpu: &Gpu, row: usize, cols: usize, format: WeightFormat, bits: &[u8]) {
        let row_bytes = format.row_bytes(cols);
        match &self.store {
            ChunkStore::Buffer(buffer) => {
                gpu.queue.write_buffer(buffer, (row * row_bytes) as u64, bits);
            }
            ChunkStore::Texture(texture, _) => {
                let rows = bits.len() / row_bytes;
                gpu.queue.write_texture(
                    wgpu::TexelCopyTextureInfo {
                        texture,
                        mip_level: 0,
                        origin: wgpu::Origin3d { x: 0, y: row as u32, z: 0 },
                        aspect: wgpu::TextureAspect::All,
                    },
                    bits,
                    wgpu::TexelCopyBufferLayout {
                        offset: 0,
                        bytes_per_row: Some(row_bytes as u32),
                        rows_per_image: None,
                    },
                    wgpu::Extent3d {
                        width: format.row_texels(cols) as u32,
                        height: rows as u32,
                        depth_or_array_layers: 1,
                    },
                );
            }
        }
    }
}

/// A `[rows x cols]` matrix (the checkpoint's `[out_features, in_features]`) in `format`.
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub format: WeightFormat,
    pub chunks: Vec<Chunk>,
}

impl Matrix {
    pub fn new(gpu: &Gpu, label: &str, rows: usize, cols: usize, format: WeightFormat) -> Result<Matrix> {
        Self::with_format(gpu, label, rows, cols, usize::MAX, gpu.weight_storage, format)
    }

    /// A bf16 [`Matrix::with_format`].
    pub fn with_storage(
        gpu: &Gpu,
        label: &str,
        rows: usize,
        cols: usize,
        max_rows: usize,
        storage: WeightStorage,
    ) -> Result<Matrix> {
        Self::with_format(gpu, label, rows, cols, max_rows, storage, WeightFormat::Bf16)
    }

    /// As [`Matrix::new`] in `storage`, with at most `max_rows` rows per chunk (tests use it to
    /// force splits) and fewer where the adapter's limits say so.
    pub fn with_format(
        gpu: &Gpu,
        label: &str,
        rows: usize,
        cols: usize,
        max_rows: usize,
        storage: WeightStorage,
        format: WeightFormat,
    ) -> Result<Matrix> {
        let row_bytes = format.row_bytes(cols) as u64;
        let row_texels = format.row_texels(cols);
        let texture_side = gpu.limits.max_texture_dimension_2d as usize;
        let limit_rows = match storage {
            WeightStorage::Buffer => (gpu.max_binding() / row_bytes) as usize,
            WeightStorage::Texture if row_texels > texture_side => 0,
            WeightStorage::Texture => texture_side,
        };
        if limit_rows == 0 {
            return Err(Error::AdapterLimit(format!(
                "{label}: one row is {row_bytes} bytes, above maxStorageBufferBindingSize {} \
                 (or {row_texels} texels of maxTextureDimension2D {texture_side})",
                gpu.max_binding(),
            )));
        }
        let chunk_rows = max_rows.min(limit_rows).max(1);
        let mut chunks = Vec::new();
        let mut row_start = 0;
        while row_start < rows {
            let n = chunk_rows.min(rows - row_start);
            let name = format!("{label} rows {row_start}..{}", row_start + n);
            let store = match storage {
                WeightStorage::Buffer => ChunkStore::Buffer(gpu.storage_buffer(&name, n as u64 * row_bytes)),
                WeightStorage::Texture => {
                    let (texture, view) =
                        gpu.texel_texture(&name, format.texture_format(), row_texels as u32, n as u32);
                    ChunkStore::Texture(texture, view)
                }
            };
            chunks.push(Chunk { store, row_start, rows: n });
            row_start += n;
        }
        Ok(Matrix { rows, cols, format, chunks })
    }

    /// Writes `rows` rows starting at `row` (bf16 bits, row-major, quantised here to the matrix's
    /// format), across chunk boundaries.
    pub fn write_rows(&self, gpu: &Gpu, row: usize, bits: &[u16]) {
        let rows = bits.len() / self.cols;
        assert_eq!(rows * self.cols, bits.len());
        assert!(row + rows <= self.rows);
        let words = quant::quantise(bits, self.cols, self.format);
        let bytes: &[u8] = bytemuck::cast_slice(&words);
        let row_bytes = self.format.row_bytes(self.cols);
        for chunk in &self.chunks {
            let lo = row.max(chunk.row_start);
            let hi = (row + rows).min(chunk.row_start + chunk.rows);
            if lo >= hi {
                continue;
            }
            let src = &bytes[(lo - row) * row_bytes..(hi - row) * row_bytes];
            chunk.write(gpu, lo - chunk.row_start, self.cols, self.format, src);
        }
    }

    /// Bytes on the GPU (scales included): what a step reads of this matrix.
    pub fn bytes(&self) -> u64 {
        self.rows as u64 * self.format.row_bytes(self.cols) as u64
    }
}

pub struct LayerWeights {
    pub input_layernorm: wgpu::Buffer,          // (hidden) f32
    pub post_attention_layernorm: wgpu::Buffer, // (hidden) f32
    pub qk_norm: wgpu::Buffer,                  // (2, head_dim) f32: q_norm | k_norm
    pub qkv_proj: Matrix,                       // (q_dim + 2 kv_dim, hidden): q_proj | k_proj | v_proj
    pub o_proj: Matrix,                         // (hidden, q_dim)
    pub gate_up_proj: Matrix,                   // (2 inter, hidden): gate_proj | up_proj
    pub down_proj: Matrix,                      // (hidden, inter)
}

pub struct ModelWeights {
    pub embed_tokens: Matrix,    // (vocab, hidden)
    pub lm_head: Option<Matrix>, // (vocab, hidden); None when the embedding serves (tied, absent)
    pub norm: wgpu::Buffer,      // (hidden) f32
    pub layers: Vec<LayerWeights>,
    pub bytes: u64,
    /// Seconds spent waiting for the source's matrix rows during the upload (a disk or cache
    /// read, or weights generated on the host), and the bytes those rows came to: a load's
    /// read phase, apart from its writes to the GPU.
    pub read_s: f64,
    pub read_bytes: u64,
}

impl ModelWeights {
    pub fn lm_head(&self) -> &Matrix {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }

    /// Bytes a decode step reads once whatever its batch: every layer's matrices and lm_head
    /// (the embedding contributes a row per token), in the weights' format.
    pub fn bytes_per_token(&self) -> u64 {
        self.lm_head().bytes()
            + self
                .layers
                .iter()
                .map(|l| l.qkv_proj.bytes() + l.o_proj.bytes() + l.gate_up_proj.bytes() + l.down_proj.bytes())
                .sum::<u64>()
    }
}

/// Upload progress: bytes done of bytes total.
pub type UploadProgress<'a> = &'a mut dyn FnMut(u64, u64);

/// Uploads every tensor of `src`, the matrices in `format`, stored in `storage`.
pub async fn upload<P: TensorProvider>(
    gpu: &Gpu,
    src: &P,
    storage: WeightStorage,
    format: WeightFormat,
    progress: UploadProgress<'_>,
) -> Result<ModelWeights> {
    let cfg = src.config().clone();
    let h = cfg.hidden_size;
    let mut up =
        Uploader { gpu, src, done: 0, total: src.total_bytes(), progress, fill: None, read_s: 0.0, read_bytes: 0 };

    // Refuse early what cannot fit, naming the limit.
    let max_buffer = gpu.limits.max_buffer_size;
    let biggest_row = (h.max(cfg.intermediate_size) * 2) as u64;
    if biggest_row > gpu.max_binding() || (cfg.vocab_size as u64 * 4) > max_buffer {
        return Err(Error::AdapterLimit(format!(
            "rows of {biggest_row} bytes / logits of {} bytes exceed maxStorageBufferBindingSize {} / maxBufferSize {max_buffer}",
            cfg.vocab_size * 4,
            gpu.max_binding()
        )));
    }

    let vector = |label: &str, values: &[f32]| gpu.storage_with(label, bytemuck::cast_slice(values));

    let embed_tokens =
        Matrix::with_format(gpu, "model.embed_tokens.weight", cfg.vocab_size, h, usize::MAX, storage, format)?;
    up.fill(&embed_tokens, 0, "model.embed_tokens.weight", cfg.vocab_size).await?;

    let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
    for l in 0..cfg.num_hidden_layers {
        let p = format!("model.layers.{l}");
        let (q, kv, i) = (cfg.q_dim(), cfg.kv_dim(), cfg.intermediate_size);
        let qkv_proj = Matrix::with_format(gpu, &format!("{p}.qkv_proj"), q + 2 * kv, h, usize::MAX, storage, format)?;
        up.fill(&qkv_proj, 0, &format!("{p}.self_attn.q_proj.weight"), q).await?;
        up.fill(&qkv_proj, q, &format!("{p}.self_attn.k_proj.weight"), kv).await?;
        up.fill(&qkv_proj, q + kv, &format!("{p}.self_attn.v_proj.weight"), kv).await?;
        let o_proj =
            Matrix::with_format(gpu, &format!("{p}.self_attn.o_proj.weight"), h, q, usize::MAX, storage, format)?;
        up.fill(&o_proj, 0, &format!("{p}.self_attn.o_proj.weight"), h).await?;
        let gate_up_proj =
            Matrix::with_format(gpu, &format!("{p}.mlp.gate_up_proj"), 2 * i, h, usize::MAX, storage, format)?;
        up.fill(&gate_up_proj, 0, &format!("{p}.mlp.gate_proj.weight"), i).await?;
        up.fill(&gate_up_proj, i, &format!("{p}.mlp.up_proj.weight"), i).await?;
        let down_proj =
            Matrix::with_format(gpu, &format!("{p}.mlp.down_proj.weight"), h, i, usize::MAX, storage, format)?;
        up.fill(&down_proj, 0, &format!("{p}.mlp.down_proj.weight"), h).await?;

        let mut qk = src.f32(&format!("{p}.self_attn.q_norm.weight")).await?;
        qk.extend(src.f32(&format!("{p}.self_attn.k_norm.weight")).await?);
        layers.push(LayerWeights {
            input_layernorm: vector(
                &format!("{p}.input_layernorm"),
                &src.f32(&format!("{p}.input_layernorm.weight")).await?,
            ),
            post_attention_layernorm: vector(
                &format!("{p}.post_attention_layernorm"),
                &src.f32(&format!("{p}.post_attention_layernorm.weight")).await?,
            ),
            qk_norm: vector(&format!("{p}.qk_norm"), &qk),
            qkv_proj,
            o_proj,
            gate_up_proj,
            down_proj,
        });
        up.advance(((2 * h + 2 * cfg.head_dim) * 2) as u64);
    }
    let norm = vector("model.norm", &src.f32("model.norm.weight").await?);
    let lm_head = if src.lm_head_name() == "model.embed_tokens.weight" {
        None
    } else {
        let m = Matrix::with_format(gpu, "lm_head.weight", cfg.vocab_size, h, usize::MAX, storage, format)?;
        up.fill(&m, 0, src.lm_head_name(), cfg.vocab_size).await?;
        Some(m)
    };
    (up.progress)(up.total, up.total);
    let bytes = embed_tokens.bytes()
        + lm_head.as_ref().map_or(0, Matrix::bytes)
        + layers
            .iter()
            .map(|l| l.qkv_proj.bytes() + l.o_proj.bytes() + l.gate_up_proj.bytes() + l.down_proj.bytes())
            .sum::<u64>();
    Ok(ModelWeights { embed_tokens, lm_head, norm, layers, bytes, read_s: up.read_s, read_bytes: up.read_bytes })
}

struct Uploader<'a, P> {
    gpu: &'a Gpu,
    src: &'a P,
    done: u64,
    total: u64,
    progress: UploadProgress<'a>,
    /// Created on the first generated tensor.
    fill: Option<RandomFill>,
    /// Time awaiting `src.rows_bf16`, and the bytes it returned ([`ModelWeights::read_s`]).
    read_s: f64,
    read_bytes: u64,
}

impl<P: TensorProvider> Uploader<'_, P> {
    fn advance(&mut self, bytes: u64) {
        self.done = (self.done + bytes).min(self.total);
        (self.progress)(self.done, self.total);
    }

    /// Copies `rows` rows of tensor `name` into `m` from row `row_offset` on, a piece at a time.
    /// Generated bf16 tensors are written by the GPU; quantised ones go through the host (the
    /// fill kernel's twin), where they are quantised like a checkpoint's.
    async fn fill(&mut self, m: &Matrix, row_offset: usize, name: &str, rows: usize) -> Result<()> {
        if let Some(spec) = self.src.random_spec(name).filter(|_| m.format == WeightFormat::Bf16) {
            let fill = self.fill.get_or_insert_with(|| RandomFill::new(self.gpu));
            for chunk in &m.chunks {
                let lo = row_offset.max(chunk.row_start);
                let hi = (row_offset + rows).min(chunk.row_start + chunk.rows);
                if lo < hi {
                    fill_chunk(
                        self.gpu,
                        fill,
                        chunk,
                        lo - chunk.row_start,
                        spec,
                        lo - row_offset..hi - row_offset,
                        m.cols,
                    );
                }
            }
            self.advance((rows * m.cols * 2) as u64);
            // Let the queue drain now and then so progress means something and memory stays bounded.
            self.gpu.sync().await?;
            return Ok(());
        }
        let piece = (PIECE_BYTES / (m.cols * 2)).max(1);
        let mut r = 0;
        while r < rows {
            let n = piece.min(rows - r);
            let asked_s = crate::clock::now_s();
            let bits = self.src.rows_bf16(name, r, n).await?;
            self.read_s += crate::clock::now_s() - asked_s;
            self.read_bytes += (bits.len() * 2) as u64;
            m.write_rows(self.gpu, row_offset + r, &bits);
            self.advance((bits.len() * 2) as u64);
            r += n;
        }
        Ok(())
    }
}

/// Writes tensor rows `rows` of a generated tensor into `chunk` from chunk row `at` on: the GPU
/// writes them straight into a buffer, or into a scratch buffer copied to a texture. Texture copies
/// need rows of a multiple of 256 bytes; other widths are generated on the host.
fn fill_chunk(
    gpu: &Gpu,
    fill: &RandomFill,
    chunk: &Chunk,
    at: usize,
    spec: crate::gpu::fill::RandomSpec,
    rows: std::ops::Range<usize>,
    cols: usize,
) {
    let row_bytes = cols * 2;
    match &chunk.store {
        ChunkStore::Buffer(buffer) => fill.fill(gpu, buffer, (at * row_bytes) as u64, spec, rows, cols),
        ChunkStore::Texture(texture, _) if row_bytes.is_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT as usize) => {
            // In pieces, so the scratch buffer stays well inside one binding.
            let piece = (PIECE_BYTES * 2 / row_bytes).max(1);
            let mut r = rows.start;
            while r < rows.end {
                let n = piece.min(rows.end - r);
                fill_texture_rows(gpu, fill, texture, at + (r - rows.start), spec, r..r + n, cols);
                r += n;
            }
        }
        ChunkStore::Texture(..) => {
            let bits: Vec<u16> = rows
                .flat_map(|r| (0..cols).map(move |c| crate::gpu::fill::random_bf16(spec, r as u32, c as u32)))
                .collect();
            chunk.write(gpu, at, cols, WeightFormat::Bf16, bytemuck::cast_slice(&bits));
        }
    }
}

/// Generated rows `rows` into texture rows `at..`, through a scratch buffer.
fn fill_texture_rows(
    gpu: &Gpu,
    fill: &RandomFill,
    texture: &wgpu::Texture,
    at: usize,
    spec: crate::gpu::fill::RandomSpec,
    rows: std::ops::Range<usize>,
    cols: usize,
) {
    let (n, row_bytes) = (rows.len(), cols * 2);
    let scratch = gpu.storage_buffer("fill scratch", (n * row_bytes) as u64);
    fill.fill(gpu, &scratch, 0, spec, rows, cols);
    let mut encoder = gpu.device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_texture(
        wgpu::TexelCopyBufferInfo {
            buffer: &scratch,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(row_bytes as u32),
                rows_per_image: None,
            },
        },
        wgpu::TexelCopyTextureInfo {
            texture,
            mip_level: 0,
            origin: wgpu::Origin3d { x: 0, y: at as u32, z: 0 },
            aspect: wgpu::TextureAspect::All,
        },
        wgpu::Extent3d { width: (cols / 8) as u32, height: n as u32, depth_or_array_layers: 1 },
    );
    gpu.queue.submit([encoder.finish()]);
}
