//! Device and queue, with the adapter's limits requested in full (big models need the
//! adapter's largest storage binding and buffer, not WebGPU's defaults).

use crate::error::{Error, Result};
use crate::gpu::kernels::{Compiled, KernelFamily, KernelOptions};
use crate::gpu::WeightStorage;
use serde::Serialize;

/// What the user is told about the adapter.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
pub struct AdapterSummary {
    pub name: String,
    pub backend: String,
    pub device_type: String,
    pub driver: String,
    pub max_storage_buffer_binding_size: u64,
    pub max_buffer_size: u64,
    pub max_compute_workgroups_per_dimension: u32,
    /// What the adapter offers.
    pub features: Vec<String>,
    /// What the engine asked for and the device has (see `wanted_features`): what the kernels
    /// may use. Absent from results saved before it was recorded.
    #[serde(default)]
    pub enabled_features: Vec<String>,
    /// The adapter's own kernel family (`gpu` or `cpu`, see [`KernelFamily`]): what runs unless a
    /// switch says otherwise (the run record's `kernels.family` says what ran); results saved
    /// before it was recorded ran the CPU family.
    #[serde(default = "KernelFamily::software")]
    pub kernel_family: KernelFamily,
}

/// A shared handle to the device: `Arc` natively (tests share one device across threads),
/// `Rc` in the browser, where WebGPU handles are not `Send`.
#[cfg(not(target_arch = "wasm32"))]
pub type SharedGpu = std::sync::Arc<Gpu>;
#[cfg(target_arch = "wasm32")]
pub type SharedGpu = std::rc::Rc<Gpu>;

/// What the device reported outside any error scope: the first uncaptured error (a validation or
/// internal error, or an allocation that failed) and whether the device was lost. Written by
/// wgpu's callbacks, read by [`Gpu::fault`]; once set it stays set, since the work around an
/// error cannot be trusted and a lost device does not come back.
#[derive(Default)]
struct Faults {
    first_error: Option<String>,
    lost: Option<String>,
}

type FaultSlot = std::sync::Arc<std::sync::Mutex<Faults>>;

fn faults(slot: &FaultSlot) -> std::sync::MutexGuard<'_, Faults> {
    // A callback cannot panic while holding the lock (it only assigns), so poison is not expected;
    // if it happens, the data is still the last write.
    slot.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// In place of wgpu's default handlers (which panic on an uncaptured error): both callbacks only
/// record what happened, for the next engine step or load to return as [`Error::Gpu`].
fn watch(device: &wgpu::Device) -> FaultSlot {
    let slot = FaultSlot::default();
    let on_error = slot.clone();
    device.on_uncaptured_error(std::sync::Arc::new(move |e: wgpu::Error| {
        let mut f = faults(&on_error);
        if f.first_error.is_none() {
            f.first_error = Some(e.to_string());
        }
    }));
    let on_lost = slot.clone();
    device.set_device_lost_callback(move |reason, message| {
        let why = match reason {
            wgpu::DeviceLostReason::Destroyed => "destroyed",
            _ => "lost",
        };
        let message = message.trim();
        faults(&on_lost).lost = Some(if message.is_empty() { why.to_string() } else { format!("{why}: {message}") });
    });
    slot
}

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub adapter: AdapterSummary,
    pub limits: wgpu::Limits,
    /// The adapter's own choices, which [`KernelOptions::for_gpu`] takes unless a switch says
    /// otherwise: where weights live, and the kernel family.
    pub weight_storage: WeightStorage,
    pub kernel_family: KernelFamily,
    /// The device has `SUBGROUP` and a subgroup reduction compiled on it: the kernels may use
    /// subgroup operations ([`crate::gpu::kernels::KernelOptions::subgroups`]).
    pub subgroups: bool,
    /// Held for the device's lifetime: in Chromium, once the instance behind a device is
    /// garbage-collected, buffer mapping fails ("A valid external Instance reference no longer
    /// exists"), at a moment that depends on the collector.
    _instance: Option<wgpu::Instance>,
    _wgpu_adapter: wgpu::Adapter,
    faults: FaultSlot,
    /// Kernel pipelines built on this device, by options (`Kernels::with_options`).
    pub(crate) compiled: std::sync::Mutex<Vec<(KernelOptions, std::sync::Arc<Compiled>)>>,
}

/// Optional features the engine uses where the adapter has them: subgroups (the kernels use them
/// unless `KernelSwitches::subgroups` says off; a feature enabled and unused changes nothing), and
/// natively timestamp queries (per-kernel GPU time for `--profile`), in the browser `shader-f16`
/// (recorded; no kernel needs it: weights are bf16, unpacked to f32 with integer ops). In the
/// browser subgroups are not asked of SwiftShader, which stalls on the large subgroup kernels
/// (Chrome's SwiftShader does not offer them; Dawn over lavapipe, a CPU adapter too, does, and
/// runs them: tests/dawn). A device whose subgroup probe does not compile keeps the feature
/// unused ([`Gpu::subgroups`]).
fn wanted_features(adapter: &wgpu::Adapter, name: &str) -> wgpu::Features {
    #[cfg(target_arch = "wasm32")]
    let wanted = {
        let swiftshader = name.to_ascii_lowercase().contains("swiftshader");
        let sg = if swiftshader { wgpu::Features::empty() } else { wgpu::Features::SUBGROUP };
        sg | wgpu::Features::SHADER_F16
    };
    #[cfg(not(target_arch = "wasm32"))]
    let wanted = {
        let _ = name;
        wgpu::Features::TIMESTAMP_QUERY | wgpu::Features::SUBGROUP
    };
    wanted & adapter.features()
}

/// Whether a subgroup reduction compiles on `device` (opened with `SUBGROUP`), with the
/// `enable subgroups;` line the browser needs (naga, natively, takes the feature alone).
async fn subgroups_compile(device: &wgpu::Device) -> bool {
    let enable = if cfg!(target_arch = "wasm32") { "enable subgroups;\n" } else { "" };
    let source = format!(
        "{enable}@group(0) @binding(0) var<storage, read_write> out: array<f32>;\n\
         @compute @workgroup_size(64)\n\
         fn probe(@builtin(local_invocation_index) li: u32) {{ out[li] = subgroupAdd(f32(li)); }}\n"
    );
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some("subgroup probe"),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let _ = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: Some("subgroup probe"),
        layout: None,
        module: &module,
        entry_point: Some("probe"),
        compilation_options: Default::default(),
        cache: None,
    });
    scope.pop().await.is_none()
}

impl Gpu {
    /// Waits until the GPU has finished all submitted work.
    pub async fn sync(&self) -> Result<()> {
        let (tx, rx) = futures_channel::oneshot::channel();
        self.queue.on_submitted_work_done(move || {
            let _ = tx.send(());
        });
        #[cfg(not(target_arch = "wasm32"))]
        self.device
            .poll(wgpu::PollType::wait_indefinitely())
            .map_err(|e| crate::Error::Gpu(format!("device poll failed: {e}")))?;
        rx.await.map_err(|_| crate::Error::Gpu("work-done callback dropped".into()))
    }

    /// The first adapter the platform offers (lavapipe on these machines, the browser's GPU on the web).
    pub async fn new() -> Result<Gpu> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor::new_without_display_handle_from_env());
        let adapter = wgpu::util::initialize_adapter_from_env_or_default(&instance, None)
            .await
            .map_err(|e| Error::NoAdapter(e.to_string()))?;
        Self::open(Some(instance), adapter).await
    }

    pub async fn from_adapter(adapter: wgpu::Adapter) -> Result<Gpu> {
        Self::open(None, adapter).await
    }

    async fn open(instance: Option<wgpu::Instance>, adapter: wgpu::Adapter) -> Result<Gpu> {
        let info = adapter.get_info();
        // Browsers may hide the adapter's name; say what we know instead of nothing.
        let name = if info.name.is_empty() {
            format!("WebGPU adapter ({})", info.driver).replace(" ()", "")
        } else {
            info.name.clone()
        };
        let kernel_family =
            KernelFamily::for_adapter(&format!("{:?}", info.device_type), &format!("{} {}", name, info.driver));
        let supported = adapter.limits();
        let limits = wgpu::Limits {
            max_storage_buffer_binding_size: supported.max_storage_buffer_binding_size,
            max_buffer_size: supported.max_buffer_size,
            // Weight textures hold up to this many rows each.
            max_texture_dimension_2d: supported.max_texture_dimension_2d,
            // Every WebGPU adapter supports the defaults; the two sizes above are what big models need.
            ..wgpu::Limits::default()
        };
        let (device, queue) = adapter
            .request_device(&wgpu::DeviceDescriptor {
                label: Some("tokenmeter device"),
                required_features: wanted_features(&adapter, &name),
                required_limits: limits.clone(),
                experimental_features: wgpu::ExperimentalFeatures::disabled(),
                memory_hints: wgpu::MemoryHints::Performance,
                trace: wgpu::Trace::Off,
            })
            .await
            // Not `NoAdapter`: the page tells a browser without WebGPU (no adapter) by that variant.
            .map_err(|e| Error::Gpu(format!("could not open the device: {e}")))?;
        let mut features: Vec<String> = adapter.features().iter_names().map(|(name, _)| name.to_string()).collect();
        features.sort();
        let mut enabled_features: Vec<String> =
            device.features().iter_names().map(|(name, _)| name.to_string()).collect();
        enabled_features.sort();
        let summary = AdapterSummary {
            name,
            backend: format!("{:?}", info.backend),
            device_type: format!("{:?}", info.device_type),
            driver: format!("{} {}", info.driver, info.driver_info).trim().to_string(),
            max_storage_buffer_binding_size: limits.max_storage_buffer_binding_size,
            max_buffer_size: limits.max_buffer_size,
            max_compute_workgroups_per_dimension: limits.max_compute_workgroups_per_dimension,
            features,
            enabled_features,
            kernel_family,
        };
        let weight_storage = WeightStorage::for_adapter(&info);
        // Offered but unusable (a browser's WGSL compiler refusing `enable subgroups;`, say): the
        // kernels keep to workgroup memory. (A second device from the same adapter is not an
        // option: WebGPU consumes an adapter on its first `requestDevice`.)
        let subgroups = device.features().contains(wgpu::Features::SUBGROUP) && subgroups_compile(&device).await;
        let faults = watch(&device);
        Ok(Gpu {
            device,
            queue,
            adapter: summary,
            limits,
            weight_storage,
            kernel_family,
            subgroups,
            _instance: instance,
            _wgpu_adapter: adapter,
            faults,
            compiled: Default::default(),
        })
    }

    /// The device's loss or first uncaptured error, as the error the caller returns; `None`
    /// while the device is healthy. Engine steps and loads check it after their work.
    pub fn fault(&self) -> Option<Error> {
        let f = faults(&self.faults);
        match (&f.lost, &f.first_error) {
            (Some(lost), Some(error)) => {
                Some(Error::Gpu(format!("the GPU device was {lost} (after an error: {})", first_line(error))))
            }
            (Some(lost), None) => Some(Error::Gpu(format!("the GPU device was {lost}"))),
            (None, Some(error)) => Some(Error::Gpu(first_line(error))),
            (None, None) => None,
        }
    }

    /// `Err` with [`Gpu::fault`] when the device has one.
    pub fn check(&self) -> Result<()> {
        self.fault().map_or(Ok(()), Err)
    }

    /// Whether the device is gone: nothing more can run on it; a new [`Gpu`] is needed.
    pub fn is_lost(&self) -> bool {
        faults(&self.faults).lost.is_some()
    }

    /// Whether the device is unusable: lost, or an uncaptured error happened on it.
    pub fn is_faulty(&self) -> bool {
        let f = faults(&self.faults);
        f.lost.is_some() || f.first_error.is_some()
    }

    /// Largest storage binding in bytes.
    pub fn max_binding(&self) -> u64 {
        self.limits.max_storage_buffer_binding_size.min(self.limits.max_buffer_size)
    }

    pub fn storage_buffer(&self, label: &str, bytes: u64) -> wgpu::Buffer {
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: bytes.max(16).next_multiple_of(16),
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    }

    /// A `width` x `height` `rgba32uint` texture (8 bf16 per texel) that kernels read and copies
    /// write, with its view.
    pub fn texel_texture(
        &self,
        label: &str,
        format: wgpu::TextureFormat,
        width: u32,
        height: u32,
    ) -> (wgpu::Texture, wgpu::TextureView) {
        let texture = self.device.create_texture(&wgpu::TextureDescriptor {
            label: Some(label),
            size: wgpu::Extent3d { width, height, depth_or_array_layers: 1 },
            mip_level_count: 1,
            sample_count: 1,
            dimension: wgpu::TextureDimension::D2,
            format,
            usage: wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            view_formats: &[],
        });
        let view = texture.create_view(&Default::default());
        (texture, view)
    }

    pub fn storage_with(&self, label: &str, contents: &[u8]) -> wgpu::Buffer {
        let buffer = self.storage_buffer(label, contents.len() as u64);
        if !contents.is_empty() {
            self.queue.write_buffer(&buffer, 0, contents);
        }
        buffer
    }
}

/// wgpu's error text spans lines (the error, then its causes, indented); one line for the CLI's
/// `error:` and the page's status, the causes joined.
fn first_line(text: &str) -> String {
    text.lines().map(str::trim).filter(|l| !l.is_empty()).collect::<Vec<_>>().join(" ")
}
