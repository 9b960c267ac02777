//! A step's dispatches, recorded before any GPU work so that all parameter blocks go up in one
//! write, then encoded into one compute pass — or profiled, dispatch by dispatch.

use super::pipelines::Kernels;
use super::registry::Kernel;
use bytemuck::Pod;
use std::collections::HashMap;

/// Each kernel's parameter block is bound as this many bytes at a 256-byte aligned offset.
pub const PARAM_SLOT: u64 = 256;
/// Distinct parameter blocks per step (deduplicated: layers share theirs).
pub const MAX_PARAM_SLOTS: u64 = 256;

/// Dispatches of one step, recorded before any GPU work so that all parameter blocks go up
/// in a single write.
pub struct StepRecorder<'a> {
    pub(super) kernels: &'a Kernels,
    arena: Vec<u8>,
    slots: HashMap<Vec<u8>, u32>,
    dispatches: Vec<(Kernel, &'a wgpu::BindGroup, u32, [u32; 3])>,
    /// What each dispatch reads and computes, in `dispatches`' order ([`DispatchTime`]).
    work: Vec<Work>,
    pub(super) max_groups: u32,
}

/// What a matmul dispatch reads and computes (0 and 0 for every other kernel), so a profile can
/// say how near each matmul came to the read ceiling (decode) and to the FMA rate (prefill).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Work {
    /// The weight rows it reads, as stored (scales included).
    pub weight_bytes: u64,
    /// 2 × tokens × rows × K: a multiply and an add per weight per token.
    pub flops: u64,
}

/// One dispatch of a profiled step ([`StepRecorder::profile`]): its kernel, its time, and its
/// [`Work`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DispatchTime {
    pub kernel: Kernel,
    pub seconds: f64,
    pub work: Work,
}

impl<'a> StepRecorder<'a> {
    pub fn new(kernels: &'a Kernels, max_groups: u32) -> Self {
        StepRecorder {
            kernels,
            arena: Vec::new(),
            slots: HashMap::new(),
            dispatches: Vec::new(),
            work: Vec::new(),
            max_groups,
        }
    }

    /// Dispatches queued so far: a step's count once it is recorded.
    pub fn dispatch_count(&self) -> usize {
        self.dispatches.len()
    }

    /// Queues `kernel` over `groups` workgroups with `params`.
    pub fn dispatch<P: Pod>(&mut self, kernel: Kernel, bind_group: &'a wgpu::BindGroup, params: &P, groups: [u32; 3]) {
        self.dispatch_doing(kernel, bind_group, params, groups, Work::default());
    }

    /// [`StepRecorder::dispatch`] of a kernel that does `work` (a matmul).
    pub fn dispatch_doing<P: Pod>(
        &mut self,
        kernel: Kernel,
        bind_group: &'a wgpu::BindGroup,
        params: &P,
        groups: [u32; 3],
        work: Work,
    ) {
        assert!(
            groups.iter().all(|&g| g <= self.max_groups),
            "{}: {groups:?} workgroups exceed the adapter's {} per dimension",
            kernel.name(),
            self.max_groups
        );
        if groups.contains(&0) {
            return;
        }
        let bytes = bytemuck::bytes_of(params).to_vec();
        let next = self.slots.len() as u32;
        let slot = *self.slots.entry(bytes.clone()).or_insert_with(|| {
            assert!((next as u64) < MAX_PARAM_SLOTS, "parameter arena full");
            let offset = next as usize * PARAM_SLOT as usize;
            self.arena.resize(offset + PARAM_SLOT as usize, 0);
            self.arena[offset..offset + bytes.len()].copy_from_slice(&bytes);
            next
        });
        self.dispatches.push((kernel, bind_group, slot * PARAM_SLOT as u32, groups));
        self.work.push(work);
    }

    pub fn len(&self) -> usize {
        self.dispatches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.dispatches.is_empty()
    }

    /// Writes the parameter arena and encodes every dispatch into one compute pass.
    pub fn encode(self, queue: &wgpu::Queue, encoder: &mut wgpu::CommandEncoder) {
        if !self.arena.is_empty() {
            queue.write_buffer(&self.kernels.params, 0, &self.arena);
        }
        let mut pass =
            encoder.begin_compute_pass(&wgpu::ComputePassDescriptor { label: Some("step"), timestamp_writes: None });
        for (kernel, bind_group, offset, [x, y, z]) in self.dispatches {
            pass.set_pipeline(self.kernels.compiled.pipeline(kernel));
            pass.set_bind_group(0, bind_group, &[offset]);
            pass.dispatch_workgroups(x, y, z);
        }
    }
}

/// Timestamp queries in one query set (wgpu's cap); longer steps are profiled by wall time.
const MAX_QUERIES: usize = 4096;

impl StepRecorder<'_> {
    /// Seconds each dispatch took, by kernel, in recording order. On GPUs with timestamp queries
    /// (the device was opened with `TIMESTAMP_QUERY`), the step runs as one submit with a timestamp
    /// before and after each dispatch, each in its own compute pass. Otherwise every dispatch runs
    /// alone (one submit each, waiting in between) and its wall time is kept: that works on every
    /// adapter and is exact on CPU adapters, whose timestamps do not bracket the work (on lavapipe
    /// the per-dispatch timestamps of a 146 ms 0.6B decode step summed to 63 ms).
    pub async fn profile(self, gpu: &crate::gpu::Gpu) -> crate::error::Result<Vec<DispatchTime>> {
        if !self.arena.is_empty() {
            gpu.queue.write_buffer(&self.kernels.params, 0, &self.arena);
        }
        gpu.sync().await?;
        let timestamps =
            gpu.device.features().contains(wgpu::Features::TIMESTAMP_QUERY) && gpu.adapter.device_type != "Cpu";
        if timestamps && !self.dispatches.is_empty() && 2 * self.dispatches.len() <= MAX_QUERIES {
            return self.profile_with_timestamps(gpu).await;
        }
        let mut times = Vec::with_capacity(self.dispatches.len());
        for ((kernel, bind_group, offset, [x, y, z]), work) in self.dispatches.into_iter().zip(self.work) {
            let mut encoder = gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = encoder.begin_compute_pass(&Default::default());
                pass.set_pipeline(self.kernels.compiled.pipeline(kernel));
                pass.set_bind_group(0, bind_group, &[offset]);
                pass.dispatch_workgroups(x, y, z);
            }
            let start = crate::clock::now_s();
            gpu.queue.submit([encoder.finish()]);
            gpu.sync().await?;
            times.push(DispatchTime { kernel, seconds: crate::clock::now_s() - start, work });
        }
        Ok(times)
    }

    async fn profile_with_timestamps(self, gpu: &crate::gpu::Gpu) -> crate::error::Result<Vec<DispatchTime>> {
        let queries = 2 * self.dispatches.len() as u32;
        let set = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("profile"),
            ty: wgpu::QueryType::Timestamp,
            count: queries,
        });
        let bytes = queries as u64 * 8;
        let resolved = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("profile timestamps"),
            size: bytes,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let mut encoder = gpu.device.create_command_encoder(&Default::default());
        for (i, (kernel, bind_group, offset, [x, y, z])) in self.dispatches.iter().enumerate() {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some(kernel.name()),
                timestamp_writes: Some(wgpu::ComputePassTimestampWrites {
                    query_set: &set,
                    beginning_of_pass_write_index: Some(2 * i as u32),
                    end_of_pass_write_index: Some(2 * i as u32 + 1),
                }),
            });
            pass.set_pipeline(self.kernels.compiled.pipeline(*kernel));
            pass.set_bind_group(0, *bind_group, &[*offset]);
            pass.dispatch_workgroups(*x, *y, *z);
        }
        encoder.resolve_query_set(&set, 0..queries, &resolved, 0);
        gpu.queue.submit([encoder.finish()]);
        let ticks: Vec<u64> = bytemuck::pod_collect_to_vec(
            &crate::gpu::readback::read_buffer(&gpu.device, &gpu.queue, &resolved, bytes).await?,
        );
        let seconds_per_tick = gpu.queue.get_timestamp_period() as f64 * 1e-9;
        Ok(self
            .dispatches
            .iter()
            .zip(&self.work)
            .zip(ticks.chunks(2))
            .map(|(((kernel, ..), &work), t)| DispatchTime {
                kernel: *kernel,
                seconds: t[1].saturating_sub(t[0]) as f64 * seconds_per_tick,
                work,
            })
            .collect())
    }
}
