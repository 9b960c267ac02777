//! Uploading weights to GPU buffers, tensor by tensor and in row pieces, so a checkpoint is never
//! held whole in (wasm) memory. Matmul weights stay bf16, two per `u32`; norm weights become f32.
//! A matrix larger than one storage binding is split by rows into chunks that each fit.

use super::checkpoint::TensorProvider;
use crate::error::{Error, Result};
use crate::gpu::fill::RandomFill;
use crate::gpu::Gpu;

/// Rows read from the source per piece (bounds host memory during upload).
const PIECE_BYTES: usize = 16 << 20;

/// One row-range of a bf16 matrix, in its own buffer.
pub struct Chunk {
    pub buffer: wgpu::Buffer,
    pub row_start: usize,
    pub rows: usize,
}

/// A `[rows x cols]` bf16 matrix (the checkpoint's `[out_features, in_features]`).
pub struct Matrix {
    pub rows: usize,
    pub cols: usize,
    pub chunks: Vec<Chunk>,
}

impl Matrix {
    pub fn new(gpu: &Gpu, label: &str, rows: usize, cols: usize) -> Result<Matrix> {
        let max_rows = (gpu.max_binding() / (cols as u64 * 2)) as usize;
        Self::with_chunk_rows(gpu, label, rows, cols, max_rows)
    }

    /// As [`Matrix::new`] with at most `max_rows` rows per chunk (tests use it to force splits).
    pub fn with_chunk_rows(gpu: &Gpu, label: &str, rows: usize, cols: usize, max_rows: usize) -> Result<Matrix> {
        let row_bytes = cols as u64 * 2;
        if max_rows == 0 {
            return Err(Error::AdapterLimit(format!(
                "{label}: one row is {row_bytes} bytes, above maxStorageBufferBindingSize {}",
                gpu.max_binding()
            )));
        }
        let mut chunks = Vec::new();
        let mut row_start = 0;
        while row_start < rows {
            let n = max_rows.min(rows - row_start);
            let name = format!("{label} rows {row_start}..{}", row_start + n);
            chunks.push(Chunk { buffer: gpu.storage_buffer(&name, n as u64 * row_bytes), row_start, rows: n });
            row_start += n;
        }
        Ok(Matrix { rows, cols, chunks })
    }

    /// Writes `rows` rows starting at `row` (bf16 bits, row-major), across chunk boundaries.
    pub fn write_rows(&self, gpu: &Gpu, row: usize, bits: &[u16]) {
        let rows = bits.len() / self.cols;
        assert_eq!(rows * self.cols, bits.len());
        assert!(row + rows <= self.rows);
        for chunk in &self.chunks {
            let lo = row.max(chunk.row_start);
            let hi = (row + rows).min(chunk.row_start + chunk.rows);
            if lo >= hi {
                continue;
            }
            let src = &bits[(lo - row) * self.cols..(hi - row) * self.cols];
            let offset = ((lo - chunk.row_start) * self.cols * 2) as u64;
            gpu.queue.write_buffer(&chunk.buffer, offset, bytemuck::cast_slice(src));
        }
    }

    pub fn bytes(&self) -> u64 {
        self.rows as u64 * self.cols as u64 * 2
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
}

impl ModelWeights {
    pub fn lm_head(&self) -> &Matrix {
        self.lm_head.as_ref().unwrap_or(&self.embed_tokens)
    }
}

/// Upload progress: bytes done of bytes total.
pub type Progress<'a> = &'a mut dyn FnMut(u64, u64);

pub async fn upload<P: TensorProvider>(gpu: &Gpu, src: &P, progress: Progress<'_>) -> Result<ModelWeights> {
    let cfg = src.config().clone();
    let h = cfg.hidden_size;
    let mut up = Uploader { gpu, src, done: 0, total: src.total_bytes(), progress, fill: None };

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

    let embed_tokens = Matrix::new(gpu, "model.embed_tokens.weight", cfg.vocab_size, h)?;
    up.fill(&embed_tokens, 0, "model.embed_tokens.weight", cfg.vocab_size).await?;

    let mut layers = Vec::with_capacity(cfg.num_hidden_layers);
    for l in 0..cfg.num_hidden_layers {
        let p = format!("model.layers.{l}");
        let (q, kv, i) = (cfg.q_dim(), cfg.kv_dim(), cfg.intermediate_size);
        let qkv_proj = Matrix::new(gpu, &format!("{p}.qkv_proj"), q + 2 * kv, h)?;
        up.fill(&qkv_proj, 0, &format!("{p}.self_attn.q_proj.weight"), q).await?;
        up.fill(&qkv_proj, q, &format!("{p}.self_attn.k_proj.weight"), kv).await?;
        up.fill(&qkv_proj, q + kv, &format!("{p}.self_attn.v_proj.weight"), kv).await?;
        let o_proj = Matrix::new(gpu, &format!("{p}.self_attn.o_proj.weight"), h, q)?;
        up.fill(&o_proj, 0, &format!("{p}.self_attn.o_proj.weight"), h).await?;
        let gate_up_proj = Matrix::new(gpu, &format!("{p}.mlp.gate_up_proj"), 2 * i, h)?;
        up.fill(&gate_up_proj, 0, &format!("{p}.mlp.gate_proj.weight"), i).await?;
        up.fill(&gate_up_proj, i, &format!("{p}.mlp.up_proj.weight"), i).await?;
        let down_proj = Matrix::new(gpu, &format!("{p}.mlp.down_proj.weight"), h, i)?;
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
        let m = Matrix::new(gpu, "lm_head.weight", cfg.vocab_size, h)?;
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
    Ok(ModelWeights { embed_tokens, lm_head, norm, layers, bytes })
}

struct Uploader<'a, P> {
    gpu: &'a Gpu,
    src: &'a P,
    done: u64,
    total: u64,
    progress: Progress<'a>,
    /// Created on the first generated tensor.
    fill: Option<RandomFill>,
}

impl<P: TensorProvider> Uploader<'_, P> {
    fn advance(&mut self, bytes: u64) {
        self.done = (self.done + bytes).min(self.total);
        (self.progress)(self.done, self.total);
    }

    /// Copies `rows` rows of tensor `name` into `m` from row `row_offset` on, a piece at a time.
    async fn fill(&mut self, m: &Matrix, row_offset: usize, name: &str, rows: usize) -> Result<()> {
        if let Some(spec) = self.src.random_spec(name) {
            let fill = self.fill.get_or_insert_with(|| RandomFill::new(self.gpu));
            for chunk in &m.chunks {
                let lo = row_offset.max(chunk.row_start);
                let hi = (row_offset + rows).min(chunk.row_start + chunk.rows);
                if lo < hi {
                    let byte_offset = ((lo - chunk.row_start) * m.cols * 2) as u64;
                    fill.fill(self.gpu, &chunk.buffer, byte_offset, spec, lo - row_offset..hi - row_offset, m.cols);
                }
            }
            self.advance((rows * m.cols * 2) as u64);
            // Let the queue drain now and then so progress means something and memory stays bounded.
            crate::gpu::roofline::wait_idle(self.gpu).await?;
            return Ok(());
        }
        let piece = (PIECE_BYTES / (m.cols * 2)).max(1);
        let mut r = 0;
        while r < rows {
            let n = piece.min(rows - r);
            let bits = self.src.rows_bf16(name, r, n).await?;
            m.write_rows(self.gpu, row_offset + r, &bits);
            self.advance((bits.len() * 2) as u64);
            r += n;
        }
        Ok(())
    }
}
