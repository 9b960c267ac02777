//! The paged KV cache: per layer one K and one V buffer of `num_blocks * block_size` slots,
//! each slot `(n_kv_heads, head_dim)` f32; sequences own blocks through a block table.

use crate::error::{Error, Result};
use crate::gpu::Gpu;
use crate::model::Qwen3Config;

pub struct KvCache {
    pub k: Vec<wgpu::Buffer>, // per layer: (num_blocks * block_size, n_kv_heads, head_dim)
    pub v: Vec<wgpu::Buffer>,
    pub block_size: usize,
    pub num_blocks: usize,
}

impl KvCache {
    /// Bytes of K and V per token, all layers.
    pub fn bytes_per_token(cfg: &Qwen3Config) -> u64 {
        2 * cfg.num_hidden_layers as u64 * cfg.kv_dim() as u64 * 4
    }

    pub fn new(gpu: &Gpu, cfg: &Qwen3Config, block_size: usize, num_blocks: usize) -> Result<KvCache> {
        let slot_bytes = cfg.kv_dim() as u64 * 4;
        let per_layer = (num_blocks * block_size) as u64 * slot_bytes;
        if per_layer > gpu.max_binding() {
            return Err(Error::AdapterLimit(format!(
                "a KV cache of {num_blocks} blocks x {block_size} tokens needs {per_layer} bytes per layer, \
                 above maxStorageBufferBindingSize {}; use fewer KV blocks",
                gpu.max_binding()
            )));
        }
        let make = |kind: &str, l: usize| gpu.storage_buffer(&format!("layer {l} {kind} cache"), per_layer);
        Ok(KvCache {
            k: (0..cfg.num_hidden_layers).map(|l| make("K", l)).collect(),
            v: (0..cfg.num_hidden_layers).map(|l| make("V", l)).collect(),
            block_size,
            num_blocks,
        })
    }

    /// Largest block count the adapter allows for this model.
    pub fn max_blocks(gpu: &Gpu, cfg: &Qwen3Config, block_size: usize) -> usize {
        (gpu.max_binding() / (block_size as u64 * cfg.kv_dim() as u64 * 4)) as usize
    }
}

/// Free-list allocator of KV blocks.
#[derive(Debug, Clone)]
pub struct BlockAllocator {
    free: Vec<u32>,
    total: usize,
}

impl BlockAllocator {
    pub fn new(total: usize) -> Self {
        BlockAllocator { free: (0..total as u32).rev().collect(), total }
    }

    pub fn allocate(&mut self, n: usize) -> Option<Vec<u32>> {
        if n > self.free.len() {
            return None;
        }
        Some(self.free.split_off(self.free.len() - n))
    }

    pub fn release(&mut self, blocks: &mut Vec<u32>) {
        self.free.append(blocks);
    }

    pub fn free(&self) -> usize {
        self.free.len()
    }

    pub fn used(&self) -> usize {
        self.total - self.free.len()
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// The free list as it stands (read-only): once every sequence has ended it should hold each
    /// block id below `total` exactly once; a block released twice shows here as a repeat.
    pub fn free_ids(&self) -> &[u32] {
        &self.free
    }
}
