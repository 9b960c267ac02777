//! Pipelines and binding layouts, built once per device and [`KernelOptions`] and shared by every
//! kernel table made after; each table keeps its own parameter arena.

use super::options::KernelOptions;
use super::recorder::{MAX_PARAM_SLOTS, PARAM_SLOT};
use super::registry::{Access, Bind, Kernel};
use crate::gpu::WeightStorage;
use std::collections::HashMap;
use Access::{Texture, Weights, Write};

/// A kernel table: the pipelines for one set of [`KernelOptions`] (shared, see
/// [`Kernels::with_options`]) and a parameter arena of its own.
pub struct Kernels {
    pub(super) compiled: std::sync::Arc<Compiled>,
    pub(super) options: KernelOptions,
    /// The per-step parameter arena (uniform, dynamic offsets).
    pub params: wgpu::Buffer,
}

/// The pipelines and binding layouts built for one device and one set of options.
pub(crate) struct Compiled {
    pipelines: HashMap<Kernel, wgpu::ComputePipeline>,
    layouts: HashMap<Kernel, wgpu::BindGroupLayout>,
    /// Which pipelines have been recorded into a step, by `Kernel as usize`: a driver compiles a
    /// pipeline's shader at its first dispatch (llvmpipe), so a first use during a measurement
    /// is a compilation measured ([`Gpu::pipelines_used`]).
    used: Vec<std::sync::atomic::AtomicBool>,
}

impl Compiled {
    /// `kernel`'s pipeline, marked used.
    pub(super) fn pipeline(&self, kernel: Kernel) -> &wgpu::ComputePipeline {
        self.used[kernel as usize].store(true, std::sync::atomic::Ordering::Relaxed);
        &self.pipelines[&kernel]
    }
}

impl crate::gpu::Gpu {
    /// How many pipelines, over every kernel table built on this device, have been recorded into
    /// a step so far. Unchanged across a measurement means no pipeline was used for the first
    /// time during it (the benchmark's warm-up is checked this way).
    pub fn pipelines_used(&self) -> usize {
        let built = self.compiled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        built.iter().map(|(_, c)| c.used.iter().filter(|u| u.load(std::sync::atomic::Ordering::Relaxed)).count()).sum()
    }
}

impl Kernels {
    pub fn new(gpu: &crate::gpu::Gpu) -> Kernels {
        Self::with_options(gpu, KernelOptions::for_gpu(gpu, &super::KernelSwitches::default()))
    }

    /// The kernel choices this table was built with.
    pub fn options(&self) -> KernelOptions {
        self.options
    }

    /// The table for `options` on `gpu`. Its pipelines are built once per device and options and
    /// shared by every table made after (`Gpu::compiled`): a driver compiles a pipeline's shader
    /// once (Mesa's llvmpipe at its first dispatch, about a second for the kernels of a step), so
    /// an engine loaded again — another model, another setting — does not pay it again. Each
    /// table has its own parameter arena, so engines on one device never share one.
    /// Options that differ only in which built kernel a step dispatches (fusion, tiled prefill,
    /// the GEMV's reach and one-token loop) share one set: the kernel trial switches those
    /// without compiling anything again.
    pub fn with_options(gpu: &crate::gpu::Gpu, options: KernelOptions) -> Kernels {
        let compiled = {
            let mut built = gpu.compiled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            let key = options.pipelines_key();
            match built.iter().find(|(o, _)| *o == key) {
                Some((_, c)) => c.clone(),
                None => {
                    let c = std::sync::Arc::new(Compiled::build(&gpu.device, key));
                    built.push((key, c.clone()));
                    c
                }
            }
        };
        Kernels { compiled, options, params: arena(gpu) }
    }

    /// A table of `kernels` alone, built now and not shared: the kernels an engine never
    /// dispatches in a step (`Needs::Standalone`: the synthetic-weight fill, the roofline probe),
    /// declared in the registry like every other so the contract tests cover them.
    pub fn standalone(gpu: &crate::gpu::Gpu, kernels: &[Kernel]) -> Kernels {
        let options = KernelOptions::default();
        let mut compiled = Compiled { pipelines: HashMap::new(), layouts: HashMap::new(), used: Vec::new() };
        for &kernel in kernels {
            let (pipeline, layout) = Compiled::build_one(&gpu.device, options, kernel);
            compiled.pipelines.insert(kernel, pipeline);
            compiled.layouts.insert(kernel, layout);
        }
        compiled.used = Kernel::ALL.iter().map(|_| Default::default()).collect();
        Kernels { compiled: std::sync::Arc::new(compiled), options, params: arena(gpu) }
    }

    /// `kernel`'s pipeline, for the standalone kernels' own passes (an engine records through
    /// [`super::StepRecorder`]).
    pub fn pipeline(&self, kernel: Kernel) -> &wgpu::ComputePipeline {
        self.compiled.pipeline(kernel)
    }
}

/// A table's parameter arena: uniform, addressed by dynamic offsets.
fn arena(gpu: &crate::gpu::Gpu) -> wgpu::Buffer {
    gpu.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("kernel parameter arena"),
        size: PARAM_SLOT * MAX_PARAM_SLOTS,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    })
}

impl Compiled {
    fn build(device: &wgpu::Device, options: KernelOptions) -> Compiled {
        let mut pipelines = HashMap::new();
        let mut layouts = HashMap::new();
        // Only the matmuls these options use are built (the others may not compile on this adapter).
        for kernel in Kernel::ALL.iter().copied().filter(|&k| options.builds(k)) {
            let (pipeline, layout) = Self::build_one(device, options, kernel);
            pipelines.insert(kernel, pipeline);
            layouts.insert(kernel, layout);
        }
        // The matmuls share one binding layout: a bind group made for any of them (callers use
        // `Kernel::Matmul`) serves the one a step picks.
        let general = layouts[&Kernel::MatmulM1].clone();
        for kernel in [Kernel::Matmul, Kernel::MatmulWide, Kernel::MatmulTall] {
            layouts.entry(kernel).or_insert_with(|| general.clone());
        }
        let used = Kernel::ALL.iter().map(|_| Default::default()).collect();
        Compiled { pipelines, layouts, used }
    }

    /// One kernel's pipeline and binding layout: binding 0 the parameter uniform (dynamic offset),
    /// then its storage bindings in the registry's order.
    fn build_one(
        device: &wgpu::Device,
        options: KernelOptions,
        kernel: Kernel,
    ) -> (wgpu::ComputePipeline, wgpu::BindGroupLayout) {
        let (source, entry) = kernel.source_in(options.weights, options.format, options.shader_dir);
        let name = kernel.name();
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: None,
            },
            count: None,
        }];
        for (i, &access) in kernel.bindings().iter().enumerate() {
            let texture = access == Texture || (access == Weights && options.weights == WeightStorage::Texture);
            let ty = if texture {
                wgpu::BindingType::Texture {
                    sample_type: wgpu::TextureSampleType::Uint,
                    view_dimension: wgpu::TextureViewDimension::D2,
                    multisampled: false,
                }
            } else {
                wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Storage { read_only: access != Write },
                    has_dynamic_offset: false,
                    min_binding_size: None,
                }
            };
            entries.push(wgpu::BindGroupLayoutEntry {
                binding: i as u32 + 1,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty,
                count: None,
            });
        }
        let layout =
            device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor { label: Some(name), entries: &entries });
        let desc = wgpu::ShaderModuleDescriptor { label: Some(name), source: wgpu::ShaderSource::Wgsl(source.into()) };
        let module = if options.unchecked {
            unsafe { device.create_shader_module_trusted(desc, wgpu::ShaderRuntimeChecks::unchecked()) }
        } else {
            device.create_shader_module(desc)
        };
        let pipeline_layout = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some(name),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(name),
            layout: Some(&pipeline_layout),
            module: &module,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        });
        (pipeline, layout)
    }
}

impl Kernels {
    /// A bind group for `kernel` over `buffers` (bindings 1.. in the kernel's order; weights are a
    /// `weights::Chunk`).
    pub fn bind(&self, device: &wgpu::Device, kernel: Kernel, label: &str, buffers: &[&dyn Bind]) -> wgpu::BindGroup {
        assert_eq!(buffers.len(), kernel.bindings().len(), "{}: wrong number of buffers", kernel.name());
        let mut entries = vec![wgpu::BindGroupEntry {
            binding: 0,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: &self.params,
                offset: 0,
                size: Some(std::num::NonZeroU64::new(PARAM_SLOT).expect("non-zero")),
            }),
        }];
        for (i, buffer) in buffers.iter().enumerate() {
            entries.push(wgpu::BindGroupEntry { binding: i as u32 + 1, resource: buffer.resource() });
        }
        device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(label),
            layout: &self.compiled.layouts[&kernel],
            entries: &entries,
        })
    }
}
