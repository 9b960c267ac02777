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

/// KV block allocator: a free list, a reference count per block, and (with prefix caching) the
/// table of cached blocks.
///
/// Prefix caching (vLLM's automatic prefix caching, full blocks only): every full block of a
/// sequence whose slots are all committed is registered under a hash chained with its parent
/// block's hash, so a hash names the whole prefix up to the end of its block. A new sequence whose
/// leading full blocks hash the same shares those blocks (their reference count goes up) instead
/// of recomputing them. A cached block whose count falls to 0 keeps its K/V and its table entry:
/// it counts as free, sits in LRU order, and is either shared again by a later hit or evicted
/// (table entry dropped) when [`BlockAllocator::allocate`] runs out of never-cached blocks.
#[derive(Debug, Clone)]
pub struct BlockAllocator {
    /// Blocks holding nothing anyone may want (never cached, or evicted), reference count 0.
    free: Vec<u32>,
    total: usize,
    /// Per block: sequences holding it.
    refs: Vec<u32>,
    /// `None`: prefix caching off.
    cache: Option<PrefixCache>,
}

#[derive(Debug, Clone, Default)]
struct PrefixCache {
    by_hash: std::collections::HashMap<u64, u32>,
    /// Per block: its entry in `by_hash` and the tokens it holds (checked on a hit, so a hash
    /// collision costs a miss, never wrong K/V).
    entry: Vec<Option<(u64, Vec<u32>)>>,
    /// Cached blocks with reference count 0, oldest release first: the eviction order.
    lru: std::collections::BTreeMap<u64, u32>,
    /// Per block: its key in `lru` while it is there.
    lru_key: Vec<Option<u64>>,
    tick: u64,
}

/// The hash of a full block of `tokens` following the prefix whose last block hashed to `parent`
/// (0 for the first block). In-process only: never stored or compared across runs.
pub fn block_hash(parent: u64, tokens: &[u32]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    parent.hash(&mut h);
    tokens.hash(&mut h);
    h.finish()
}

impl BlockAllocator {
    pub fn new(total: usize) -> Self {
        BlockAllocator { free: (0..total as u32).rev().collect(), total, refs: vec![0; total], cache: None }
    }

    /// An allocator that caches full blocks for later sequences with the same prefix.
    pub fn with_prefix_cache(total: usize) -> Self {
        let cache = PrefixCache { entry: vec![None; total], lru_key: vec![None; total], ..PrefixCache::default() };
        BlockAllocator { cache: Some(cache), ..BlockAllocator::new(total) }
    }

    pub fn prefix_caching(&self) -> bool {
        self.cache.is_some()
    }

    /// `n` blocks for one sequence (reference count 1), from the free list first, then by evicting
    /// the least recently released cached blocks; `None` (nothing taken) when fewer are free.
    pub fn allocate(&mut self, n: usize) -> Option<Vec<u32>> {
        if n > self.free() {
            return None;
        }
        let from_list = n.min(self.free.len());
        let mut out = self.free.split_off(self.free.len() - from_list);
        if let Some(cache) = &mut self.cache {
            while out.len() < n {
                let (_, block) = cache.lru.pop_first().expect("free() counted it");
                cache.lru_key[block as usize] = None;
                let (hash, _) = cache.entry[block as usize].take().expect("an LRU block is cached");
                cache.by_hash.remove(&hash);
                out.push(block);
            }
        }
        for &b in &out {
            debug_assert_eq!(self.refs[b as usize], 0);
            self.refs[b as usize] = 1;
        }
        Some(out)
    }

    /// Drops one reference to each of `blocks` (emptied). A block nobody holds any more goes to
    /// the free list, or, when cached, to the LRU end: the sequence's last blocks first, so its
    /// tail is evicted before the prefix it shares with others.
    pub fn release(&mut self, blocks: &mut Vec<u32>) {
        for &b in blocks.iter().rev() {
            let refs = &mut self.refs[b as usize];
            assert!(*refs > 0, "block {b} released more often than taken");
            *refs -= 1;
            if *refs > 0 {
                continue;
            }
            match &mut self.cache {
                Some(cache) if cache.entry[b as usize].is_some() => {
                    cache.tick += 1;
                    cache.lru.insert(cache.tick, b);
                    cache.lru_key[b as usize] = Some(cache.tick);
                }
                _ => {}
            }
        }
        let cached = |b: &u32| self.cache.as_ref().is_some_and(|c| c.lru_key[*b as usize].is_some());
        let freed: Vec<u32> = blocks.iter().copied().filter(|&b| self.refs[b as usize] == 0 && !cached(&b)).collect();
        self.free.extend(freed);
        blocks.clear();
    }

    /// The longest run of cached blocks holding `tokens` from the start, at most `max_blocks`:
    /// `(hash, block)` per full block matched. Takes nothing (see [`BlockAllocator::share`]).
    pub fn lookup(&self, tokens: &[u32], block_size: usize, max_blocks: usize) -> Vec<(u64, u32)> {
        let Some(cache) = &self.cache else { return Vec::new() };
        let mut out = Vec::new();
        let mut parent = 0;
        for chunk in tokens.chunks_exact(block_size).take(max_blocks) {
            let hash = block_hash(parent, chunk);
            let Some(&block) = cache.by_hash.get(&hash) else { break };
            if cache.entry[block as usize].as_ref().is_none_or(|(_, held)| held != chunk) {
                break;
            }
            out.push((hash, block));
            parent = hash;
        }
        out
    }

    /// One more reference to a cached block found by [`BlockAllocator::lookup`] (out of the LRU
    /// order if nobody held it).
    pub fn share(&mut self, block: u32) {
        let cache = self.cache.as_mut().expect("sharing needs the prefix cache");
        assert!(cache.entry[block as usize].is_some(), "block {block} is not cached");
        if let Some(key) = cache.lru_key[block as usize].take() {
            cache.lru.remove(&key);
        }
        self.refs[block as usize] += 1;
    }

    /// Registers a full, committed block (held by a sequence) under `hash` unless another block
    /// already holds that prefix (two sequences computed it at once; this one stays private).
    pub fn register(&mut self, block: u32, hash: u64, tokens: &[u32]) {
        let Some(cache) = &mut self.cache else { return };
        assert!(self.refs[block as usize] > 0, "block {block} registered while free");
        if cache.entry[block as usize].is_some() || cache.by_hash.contains_key(&hash) {
            return;
        }
        cache.by_hash.insert(hash, block);
        cache.entry[block as usize] = Some((hash, tokens.to_vec()));
    }

    /// Whether `block` is in the prefix table (its K/V must then never be written again).
    pub fn is_cached(&self, block: u32) -> bool {
        self.cache.as_ref().is_some_and(|c| c.entry[block as usize].is_some())
    }

    /// Sequences holding `block`.
    pub fn refcount(&self, block: u32) -> u32 {
        self.refs[block as usize]
    }

    /// Blocks nobody holds: never-cached ones and cached ones waiting in LRU order (both can be
    /// handed out by [`BlockAllocator::allocate`]).
    pub fn free(&self) -> usize {
        self.free.len() + self.cached_free()
    }

    /// Free blocks that still hold a cached prefix (evictable).
    pub fn cached_free(&self) -> usize {
        self.cache.as_ref().map_or(0, |c| c.lru.len())
    }

    pub fn used(&self) -> usize {
        self.total - self.free()
    }

    pub fn total(&self) -> usize {
        self.total
    }

    /// The blocks nobody holds, free list then LRU order: once every sequence has ended it should
    /// hold each block id below `total` exactly once; a block released twice shows as a repeat.
    pub fn free_ids(&self) -> Vec<u32> {
        let lru = self.cache.iter().flat_map(|c| c.lru.values().copied());
        self.free.iter().copied().chain(lru).collect()
    }
}
