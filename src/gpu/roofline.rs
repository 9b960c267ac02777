//! The roofline probe: the adapter's own copy and read bandwidth and FMA rate, measured with WGSL
//! microkernels, so engine figures can be reported as a fraction of what this adapter can do.
//!
//! Each figure is timed over one submission of as many back-to-back dispatches as make at least
//! [`MIN_TIMED_S`] of work (a wall clock around a single short dispatch times the submission's
//! launch and the GPU's wake-up too: on an H200 a 256 MiB copy takes ~0.1 ms, and one such timing
//! read half the copy bandwidth PyTorch measures); the median over repeats is the figure, with its
//! spread. The buffers (256 MiB each, where the adapter allows) are several times a datacenter
//! GPU's L2. The best read pattern is the figure: a storage buffer read per invocation in blocks,
//! grid-strided, or as the decode GEMV walks its weights (8 rows an invocation in lockstep) and,
//! where weights live in textures, that GEMV walk through `textureLoad`. A read ceiling must hold
//! the engine's own pattern: on a 2-core EPYC's Mesa 22.3 lavapipe, with the blocked and strided
//! buffer reads alone, the probe read 0.6–1.2 GB/s while decode (weights in textures) moved
//! 2–3.7 GB/s. The probe checks its own work (the copies' and reads' results against the pattern it
//! wrote, the texture filled from the same pattern), so a kernel that skipped its bytes cannot
//! report their speed.

use super::kernels::{Kernel, Kernels, ProbeParams as Params};
use super::{Gpu, WeightStorage};
use crate::clock::now_s;
use crate::error::{Error, Result};
use crate::gpu::kernels::PARAM_SLOT;
use serde::Serialize;

/// The least work one timed submission holds.
pub const MIN_TIMED_S: f64 = 0.02;
/// The most dispatches one timed submission holds (a very fast adapter's copy still takes ~1 s).
const MAX_DISPATCHES: u32 = 1000;

#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct Roofline {
    /// Bytes read + written per second, best pattern, GB/s.
    pub copy_gb_s: f64,
    pub copy_blocked_gb_s: f64,
    pub copy_strided_gb_s: f64,
    /// Reading an `rgba32uint` texture instead (measured where weights live in textures).
    pub copy_texture_gb_s: Option<f64>,
    /// Bytes read per second, best pattern, GB/s: what a GEMV's weights need. (Each lane also
    /// writes the one vec4 it folded its reads into: 64 KiB blocked, 4 MiB strided, not counted.)
    pub read_gb_s: f64,
    pub read_blocked_gb_s: f64,
    pub read_strided_gb_s: f64,
    /// The decode GEMV's walk ([`GEMV_ROW_VEC4S`] vec4s a row, 8 rows an invocation) through a
    /// storage buffer ...
    #[serde(default)]
    pub read_rows_gb_s: f64,
    /// ... and through a texture (where weights live in textures).
    #[serde(default)]
    pub read_rows_texture_gb_s: Option<f64>,
    pub fma_gflop_s: f64,
    pub buffer_bytes: u64,
    /// Over the repeats of the best pattern: (slowest − fastest) / median.
    pub copy_spread: f64,
    pub read_spread: f64,
    pub fma_spread: f64,
    /// Dispatches in each timed submission of the best copy pattern.
    pub copy_dispatches: u32,
    /// What one more dispatch costs inside a compute pass, microseconds: a chain of one-workgroup
    /// dispatches that each write the buffer the one before wrote (so each waits for it, as a
    /// step's do), timed at two lengths, the difference over the extra dispatches; 0 in rooflines
    /// saved before it was measured.
    #[serde(default)]
    pub dispatch_us: f64,
}

/// The upper median of timings (NaN when there are none).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

/// Element `i` of the pattern the probe fills its source with (`pattern` in roofline.wgsl).
fn pattern(i: u32) -> [u32; 4] {
    [i.wrapping_mul(2_654_435_761), i ^ 0x9e37_79b9, i.wrapping_mul(40_503).wrapping_add(1), !i]
}

/// The XOR of the pattern's elements `indices`.
fn folded(indices: impl Iterator<Item = u32>) -> [u32; 4] {
    indices.map(pattern).fold([0; 4], |a, b| std::array::from_fn(|c| a[c] ^ b[c]))
}

/// Lanes of the grid-stride kernels: 4,096 workgroups of 64.
const STRIDED_GROUPS: u32 = 4096;
/// Lanes of the blocked kernels: 64 workgroups of 64, each a contiguous run.
const BLOCKED_GROUPS: u32 = 64;
/// A weight row of the GEMV-shaped reads: 1,024 bf16 (Qwen3-0.6B's hidden width), 128 vec4s.
pub const GEMV_ROW_VEC4S: u32 = 128;

pub async fn measure(gpu: &Gpu, repeats: usize) -> Result<Roofline> {
    let d = &gpu.device;
    let bytes = (256u64 << 20).min(gpu.max_binding() / 16 * 16);
    let n = (bytes / 16) as u32;
    let src = gpu.storage_buffer("roofline src", bytes);
    let dst = gpu.storage_buffer("roofline dst", bytes);
    let texture = gpu.weight_storage == WeightStorage::Texture;
    let mut probes = vec![
        Kernel::RooflineFill,
        Kernel::CopyBlocked,
        Kernel::CopyStrided,
        Kernel::ReadBlocked,
        Kernel::ReadStrided,
        Kernel::ReadRows,
        Kernel::FmaRate,
    ];
    if texture {
        probes.extend([Kernel::CopyTexture, Kernel::ReadRowsTexture]);
    }
    let k = Kernels::standalone(gpu, &probes);
    let run = async |kernel: Kernel, p: Params, groups: u32| -> Result<Timed> {
        // Slot 0 of the table's own arena: written before the submissions that read it.
        gpu.queue.write_buffer(&k.params, 0, bytemuck::bytes_of(&p));
        let bind = k.bind(d, kernel, kernel.name(), &[&src, &dst]);
        timed(gpu, k.pipeline(kernel), &bind, groups, repeats).await
    };
    // The source's pattern: `fill` writes its `dst` binding, here the probe's source.
    let fill = Kernel::RooflineFill;
    gpu.queue.write_buffer(&k.params, 0, bytemuck::bytes_of(&Params { n, per_lane: 0, iters: 0, _pad: 0 }));
    submit_timed(gpu, k.pipeline(fill), &k.bind(d, fill, "roofline fill", &[&dst, &src]), STRIDED_GROUPS, 1).await?;
    let lanes = BLOCKED_GROUPS * 64;
    let blocked = Params { n, per_lane: n.div_ceil(lanes), iters: 0, _pad: 0 };
    let strided = Params { n, per_lane: 0, iters: 0, _pad: 0 };
    let copy_blocked = run(Kernel::CopyBlocked, blocked, BLOCKED_GROUPS).await?;
    let copy_strided = run(Kernel::CopyStrided, strided, STRIDED_GROUPS).await?;
    let check = n.min(4096);
    expect(gpu, &dst, check, "copy", pattern).await?;
    let read_blocked = run(Kernel::ReadBlocked, blocked, BLOCKED_GROUPS).await?;
    let per_lane = blocked.per_lane;
    expect(gpu, &dst, lanes.min(n), "read_blocked", |l| folded(l * per_lane..((l + 1) * per_lane).min(n))).await?;
    let read_strided = run(Kernel::ReadStrided, strided, STRIDED_GROUPS).await?;
    let stride = STRIDED_GROUPS * 64;
    expect(gpu, &dst, check, "read_strided", |l| folded((l..n).step_by(stride as usize))).await?;
    let rows = Params { n, per_lane: GEMV_ROW_VEC4S, iters: 0, _pad: 0 };
    let read_rows = run(Kernel::ReadRows, rows, gemv_groups(n)).await?;
    expect(gpu, &dst, check.min(gemv_lanes(n)), "read_rows", gemv_folded).await?;
    let (groups, iters) = (1024u32, 4096u32);
    let fma = run(Kernel::FmaRate, Params { n: groups * 64, per_lane: 0, iters, _pad: 0 }, groups).await?;
    let dispatch_us = dispatch_cost(gpu, &k, &src, &dst, repeats).await?;
    let moved = 2.0 * bytes as f64;
    let (copy_texture_gb_s, read_rows_texture) = match texture {
        true => {
            let (copy, read) = texture_probes(gpu, &k, &src, &dst, n, repeats).await?;
            (Some(copy), Some(read))
        }
        false => (None, None),
    };
    let best_copy = if copy_blocked.s <= copy_strided.s { &copy_blocked } else { &copy_strided };
    let rows_bytes = 16 * u64::from(gemv_lanes(n) * 8 * GEMV_ROW_VEC4S);
    let reads = [Some((&read_blocked, bytes)), Some((&read_strided, bytes)), Some((&read_rows, rows_bytes))];
    let texture_read = read_rows_texture.as_ref().map(|(t, b)| (t, *b));
    let (best_read, best_read_gb_s) = reads
        .into_iter()
        .chain([texture_read])
        .flatten()
        .map(|(t, b)| (t, b as f64 / t.s / 1e9))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("the buffer patterns are always measured");
    Ok(Roofline {
        copy_gb_s: (moved / best_copy.s / 1e9).max(copy_texture_gb_s.unwrap_or(0.0)),
        copy_blocked_gb_s: moved / copy_blocked.s / 1e9,
        copy_strided_gb_s: moved / copy_strided.s / 1e9,
        copy_texture_gb_s,
        read_gb_s: best_read_gb_s,
        read_blocked_gb_s: bytes as f64 / read_blocked.s / 1e9,
        read_strided_gb_s: bytes as f64 / read_strided.s / 1e9,
        read_rows_gb_s: rows_bytes as f64 / read_rows.s / 1e9,
        read_rows_texture_gb_s: texture_read.map(|(t, b)| b as f64 / t.s / 1e9),
        fma_gflop_s: (groups as f64 * 64.0 * iters as f64 * 64.0) / fma.s / 1e9,
        buffer_bytes: bytes,
        copy_spread: best_copy.spread,
        read_spread: best_read.spread,
        fma_spread: fma.spread,
        copy_dispatches: best_copy.dispatches,
        dispatch_us,
    })
}

/// Dispatches in the short and the long chain of [`dispatch_cost`].
const CHAIN: (u32, u32) = (64, 576);

/// Microseconds one more dispatch costs in a compute pass: the median over `repeats` of (the long
/// chain's time − the short one's) / the extra dispatches, each a single workgroup of the FMA
/// probe at one iteration writing `dst`, its pipeline and bind group set before it as a step's
/// are (the submission's own cost cancels out).
async fn dispatch_cost(gpu: &Gpu, k: &Kernels, src: &wgpu::Buffer, dst: &wgpu::Buffer, repeats: usize) -> Result<f64> {
    let fma = Kernel::FmaRate;
    let params = Params { n: 64, per_lane: 0, iters: 1, _pad: 0 };
    for slot in [0, PARAM_SLOT] {
        gpu.queue.write_buffer(&k.params, slot, bytemuck::bytes_of(&params));
    }
    let bind = k.bind(&gpu.device, fma, "roofline dispatch chain", &[src, dst]);
    let chain = |dispatches| submit_encoded(gpu, k.pipeline(fma), &bind, 1, dispatches, true);
    chain(CHAIN.0).await?;
    let mut per = Vec::with_capacity(repeats.max(1));
    for _ in 0..repeats.max(1) {
        let short = chain(CHAIN.0).await?;
        let long = chain(CHAIN.1).await?;
        per.push((long - short) / f64::from(CHAIN.1 - CHAIN.0) * 1e6);
    }
    Ok(median(per).max(0.0))
}

/// The first `count` vec4s of `buffer` are `want(i)`; else the probe's kernel is wrong and its
/// figure would be too.
async fn expect(
    gpu: &Gpu,
    buffer: &wgpu::Buffer,
    count: u32,
    kernel: &str,
    want: impl Fn(u32) -> [u32; 4],
) -> Result<()> {
    let got = super::readback::read_buffer(&gpu.device, &gpu.queue, buffer, count as u64 * 16).await?;
    let got: Vec<[u32; 4]> =
        bytemuck::pod_collect_to_vec::<u8, u32>(&got).chunks(4).map(|c| [c[0], c[1], c[2], c[3]]).collect();
    match (0..count).find(|&i| got[i as usize] != want(i)) {
        None => Ok(()),
        Some(i) => Err(Error::Gpu(format!(
            "the roofline's {kernel} kernel is wrong at element {i}: {:?}, expected {:?}",
            got[i as usize],
            want(i)
        ))),
    }
}

/// Texels per row of the probe texture (mirrors TEXTURE_WIDTH in roofline_texture.wgsl).
const TEXTURE_WIDTH: u32 = 4096;

/// Invocations of the GEMV-shaped reads over `n` vec4s: 8 whole rows each.
fn gemv_lanes(n: u32) -> u32 {
    n / (8 * GEMV_ROW_VEC4S)
}

fn gemv_groups(n: u32) -> u32 {
    gemv_lanes(n).div_ceil(64)
}

/// What GEMV-shaped read invocation `l` writes: the XOR of its 8 rows.
fn gemv_folded(l: u32) -> [u32; 4] {
    let rows = 8 * GEMV_ROW_VEC4S;
    folded(l * rows..(l + 1) * rows)
}

/// Where weights live in textures: the source's pattern copied into an `rgba32uint` texture, then
/// the bytes read + written per second (GB/s) copying it, blocked as in `copy_blocked`, into `dst`,
/// and the GEMV's read of it (its timing and the bytes it reads; checked like the buffer reads).
async fn texture_probes(
    gpu: &Gpu,
    k: &Kernels,
    src: &wgpu::Buffer,
    dst: &wgpu::Buffer,
    n: u32,
    repeats: usize,
) -> Result<(f64, (Timed, u64))> {
    let height = n / TEXTURE_WIDTH;
    let n = height * TEXTURE_WIDTH;
    let (texture, view) = gpu.texel_texture("roofline texture", wgpu::TextureFormat::Rgba32Uint, TEXTURE_WIDTH, height);
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_texture(
        wgpu::TexelCopyBufferInfo {
            buffer: src,
            layout: wgpu::TexelCopyBufferLayout {
                offset: 0,
                bytes_per_row: Some(16 * TEXTURE_WIDTH),
                rows_per_image: None,
            },
        },
        texture.as_image_copy(),
        wgpu::Extent3d { width: TEXTURE_WIDTH, height, depth_or_array_layers: 1 },
    );
    gpu.queue.submit([enc.finish()]);
    let run = async |kernel: Kernel, p: Params, groups: u32| -> Result<Timed> {
        gpu.queue.write_buffer(&k.params, 0, bytemuck::bytes_of(&p));
        let bind = k.bind(&gpu.device, kernel, kernel.name(), &[&view, dst]);
        timed(gpu, k.pipeline(kernel), &bind, groups, repeats).await
    };
    let lanes = 64 * 64;
    let copy =
        run(Kernel::CopyTexture, Params { n, per_lane: n.div_ceil(lanes), iters: 0, _pad: 0 }, BLOCKED_GROUPS).await?;
    expect(gpu, dst, n.min(4096), "copy_texture", pattern).await?;
    let read =
        run(Kernel::ReadRowsTexture, Params { n, per_lane: GEMV_ROW_VEC4S, iters: 0, _pad: 0 }, gemv_groups(n)).await?;
    expect(gpu, dst, gemv_lanes(n).min(4096), "read_rows_texture", gemv_folded).await?;
    let read_bytes = 16 * (gemv_lanes(n) * 8 * GEMV_ROW_VEC4S) as u64;
    Ok((2.0 * 16.0 * n as f64 / copy.s / 1e9, (read, read_bytes)))
}

/// A kernel's time per dispatch: the median over `repeats` submissions, each of as many dispatches
/// as make at least [`MIN_TIMED_S`] of work, and the spread of those timings.
struct Timed {
    s: f64,
    spread: f64,
    dispatches: u32,
}

/// Two untimed-for-the-figure runs of one dispatch (the first compiles; the second sizes the
/// timed submissions), then `repeats` timed submissions of `groups` workgroups of `pipe`, each
/// dispatched back to back on an idle queue.
async fn timed(
    gpu: &Gpu,
    pipe: &wgpu::ComputePipeline,
    bind: &wgpu::BindGroup,
    groups: u32,
    repeats: usize,
) -> Result<Timed> {
    submit_timed(gpu, pipe, bind, groups, 1).await?;
    let once = submit_timed(gpu, pipe, bind, groups, 1).await?;
    let dispatches = ((MIN_TIMED_S / once.max(1e-9)).ceil() as u32).clamp(1, MAX_DISPATCHES);
    let mut times = Vec::new();
    for _ in 0..repeats.max(1) {
        times.push(submit_timed(gpu, pipe, bind, groups, dispatches).await? / dispatches as f64);
    }
    let s = median(times.clone());
    let (fastest, slowest) = times.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), &t| (lo.min(t), hi.max(t)));
    Ok(Timed { s, spread: (slowest - fastest) / s, dispatches })
}

/// Wall time of one submission of `dispatches` dispatches of `groups` workgroups of `pipe` (each
/// waits for the one before: they write the same buffer), from submission to the queue's idle.
async fn submit_timed(
    gpu: &Gpu,
    pipe: &wgpu::ComputePipeline,
    bind: &wgpu::BindGroup,
    groups: u32,
    dispatches: u32,
) -> Result<f64> {
    submit_encoded(gpu, pipe, bind, groups, dispatches, false).await
}

/// [`submit_timed`] with the pipeline and bind group set again before every dispatch (`rebind`),
/// as an engine step records them (`StepRecorder::encode`): under Dawn the binding, not the
/// dispatch, was most of a step's cost of one (44 µs against 9.6 µs bound once, lavapipe).
async fn submit_encoded(
    gpu: &Gpu,
    pipe: &wgpu::ComputePipeline,
    bind: &wgpu::BindGroup,
    groups: u32,
    dispatches: u32,
    rebind: bool,
) -> Result<f64> {
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass =
            enc.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("roofline"), ..Default::default() });
        pass.set_pipeline(pipe);
        pass.set_bind_group(0, bind, &[0]);
        for i in 0..dispatches {
            if rebind {
                // Two parameter slots in turn, so no layer below may skip a binding as unchanged.
                pass.set_pipeline(pipe);
                pass.set_bind_group(0, bind, &[(i % 2) * PARAM_SLOT as u32]);
            }
            pass.dispatch_workgroups(groups, 1, 1);
        }
    }
    gpu.sync().await?;
    let t = now_s();
    gpu.queue.submit([enc.finish()]);
    gpu.sync().await?;
    Ok(now_s() - t)
}
