//! NVIDIA's management library (NVML), loaded when asked, at run time: the engine's GPU's power
//! draw and its energy counter, for a run's energy (the benchmark layer's `energy`). Nothing links
//! against it, so a machine without an NVIDIA driver (or a browser) only gets the reason it is
//! absent, never a failed start.

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use std::ffi::{c_char, c_uint, c_ulonglong, c_void, CStr};

    use libloading::Library;

    /// One NVML return code that is not success, with the call that gave it.
    fn failed(call: &str, code: i32) -> String {
        format!("{call} returned NVML error {code}")
    }

    type Device = *mut c_void;
    // nvmlReturn_t is a C enum: 0 is success.
    type InitFn = unsafe extern "C" fn() -> i32;
    type CountFn = unsafe extern "C" fn(*mut c_uint) -> i32;
    type HandleFn = unsafe extern "C" fn(c_uint, *mut Device) -> i32;
    type NameFn = unsafe extern "C" fn(Device, *mut c_char, c_uint) -> i32;
    type EnergyFn = unsafe extern "C" fn(Device, *mut c_ulonglong) -> i32;
    type PowerFn = unsafe extern "C" fn(Device, *mut c_uint) -> i32;

    /// The library, initialised (`nvmlInit_v2`) until dropped (`nvmlShutdown`).
    pub struct Nvml {
        count: CountFn,
        handle: HandleFn,
        name: NameFn,
        energy: EnergyFn,
        power: PowerFn,
        shutdown: InitFn,
        /// `nvmlInit_v2` succeeded: dropping shuts NVML down.
        initialised: bool,
        // Last: the functions above point into it.
        _library: Library,
    }

    /// Where the driver installs it.
    pub const LIBRARY: &str = if cfg!(windows) { "nvml.dll" } else { "libnvidia-ml.so.1" };

    impl Nvml {
        /// The driver's NVML, initialised; `Err` says why not (no driver, no GPU, an old NVML).
        pub fn load() -> Result<Nvml, String> {
            Nvml::load_from(LIBRARY)
        }

        /// NVML from the library file `name`.
        pub fn load_from(name: &str) -> Result<Nvml, String> {
            // SAFETY: loading runs the library's initialisers; NVML's are the driver's own.
            let library = unsafe { Library::new(name) }.map_err(|e| format!("NVML not loaded: {e}"))?;
            let symbol_error = |e: libloading::Error| format!("{name}: {e}");
            // SAFETY: each symbol is read with the signature NVML's header gives it, and copied
            // out as a plain function pointer kept beside the library it points into.
            let nvml = unsafe {
                let init = *library.get::<InitFn>(b"nvmlInit_v2\0").map_err(symbol_error)?;
                let nvml = Nvml {
                    count: *library.get::<CountFn>(b"nvmlDeviceGetCount_v2\0").map_err(symbol_error)?,
                    handle: *library.get::<HandleFn>(b"nvmlDeviceGetHandleByIndex_v2\0").map_err(symbol_error)?,
                    name: *library.get::<NameFn>(b"nvmlDeviceGetName\0").map_err(symbol_error)?,
                    energy: *library.get::<EnergyFn>(b"nvmlDeviceGetTotalEnergyConsumption\0").map_err(symbol_error)?,
                    power: *library.get::<PowerFn>(b"nvmlDeviceGetPowerUsage\0").map_err(symbol_error)?,
                    shutdown: *library.get::<InitFn>(b"nvmlShutdown\0").map_err(symbol_error)?,
                    initialised: false,
                    _library: library,
                };
                (init(), nvml)
            };
            match nvml {
                (0, mut nvml) => {
                    nvml.initialised = true;
                    Ok(nvml)
                }
                (code, _) => Err(failed("nvmlInit_v2", code)),
            }
        }

        /// GPUs NVML sees.
        pub fn device_count(&self) -> Result<u32, String> {
            let mut count: c_uint = 0;
            // SAFETY: NVML writes one unsigned int.
            match unsafe { (self.count)(&mut count) } {
                0 => Ok(count),
                code => Err(failed("nvmlDeviceGetCount_v2", code)),
            }
        }

        fn device(&self, index: u32) -> Result<Device, String> {
            let mut device: Device = std::ptr::null_mut();
            // SAFETY: NVML writes one handle.
            match unsafe { (self.handle)(index, &mut device) } {
                0 => Ok(device),
                code => Err(failed("nvmlDeviceGetHandleByIndex_v2", code)),
            }
        }

        /// GPU `index`'s name ("NVIDIA H200").
        pub fn name(&self, index: u32) -> Result<String, String> {
            let device = self.device(index)?;
            let mut name = [0 as c_char; 96]; // NVML_DEVICE_NAME_V2_BUFFER_SIZE
                                              // SAFETY: NVML writes a NUL-terminated string of at most `len` bytes.
            match unsafe { (self.name)(device, name.as_mut_ptr(), name.len() as c_uint) } {
                0 => {}
                code => return Err(failed("nvmlDeviceGetName", code)),
            }
            *name.last_mut().expect("not empty") = 0;
            // SAFETY: NUL-terminated above at the latest.
            Ok(unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy().into_owned())
        }

        /// GPU `index`'s energy since the driver loaded, mJ (Volta and later).
        pub fn energy_mj(&self, index: u32) -> Result<u64, String> {
            let device = self.device(index)?;
            let mut energy: c_ulonglong = 0;
            // SAFETY: NVML writes one unsigned long long.
            match unsafe { (self.energy)(device, &mut energy) } {
                0 => Ok(energy),
                code => Err(failed("nvmlDeviceGetTotalEnergyConsumption", code)),
            }
        }

        /// GPU `index`'s power draw now, mW.
        pub fn power_mw(&self, index: u32) -> Result<u32, String> {
            let device = self.device(index)?;
            let mut power: c_uint = 0;
            // SAFETY: NVML writes one unsigned int.
            match unsafe { (self.power)(device, &mut power) } {
                0 => Ok(power),
                code => Err(failed("nvmlDeviceGetPowerUsage", code)),
            }
        }
    }

    impl Drop for Nvml {
        fn drop(&mut self) {
            if self.initialised {
                // SAFETY: initialised in `load_from`; shut down once.
                let _ = unsafe { (self.shutdown)() };
            }
        }
    }
}

#[cfg(target_arch = "wasm32")]
mod web {
    /// A browser has no NVML: every call says so.
    pub struct Nvml;

    pub const LIBRARY: &str = "libnvidia-ml.so.1";
    const ABSENT: &str = "a browser has no NVML (WebGPU does not report power)";

    impl Nvml {
        pub fn load() -> Result<Nvml, String> {
            Err(ABSENT.into())
        }
        pub fn load_from(_name: &str) -> Result<Nvml, String> {
            Err(ABSENT.into())
        }
        pub fn device_count(&self) -> Result<u32, String> {
            Err(ABSENT.into())
        }
        pub fn name(&self, _index: u32) -> Result<String, String> {
            Err(ABSENT.into())
        }
        pub fn energy_mj(&self, _index: u32) -> Result<u64, String> {
            Err(ABSENT.into())
        }
        pub fn power_mw(&self, _index: u32) -> Result<u32, String> {
            Err(ABSENT.into())
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use native::{Nvml, LIBRARY};
#[cfg(target_arch = "wasm32")]
pub use web::{Nvml, LIBRARY};

/// Which of NVML's GPUs is the adapter named `adapter`: the only one of that name, else GPU 0;
/// with how it was picked, for the record.
pub fn pick(nvml: &Nvml, adapter: &str) -> Result<(u32, String), String> {
    let count = nvml.device_count()?;
    if count == 0 {
        return Err("NVML sees no GPU".into());
    }
    let names: Vec<String> = (0..count).map(|i| nvml.name(i).unwrap_or_default()).collect();
    Ok(choose(&names, adapter))
}

/// [`pick`]'s rule over NVML's names.
fn choose(names: &[String], adapter: &str) -> (u32, String) {
    let same: Vec<usize> = (0..names.len()).filter(|&i| !adapter.is_empty() && names[i] == adapter).collect();
    match same[..] {
        [i] => (i as u32, format!("GPU {i} ({}, matched by the adapter's name)", names[i])),
        _ => {
            let why = if same.is_empty() {
                format!("no NVML GPU is named {adapter:?}")
            } else {
                format!("{} NVML GPUs are named {adapter:?}", same.len())
            };
            let name = names.first().map_or("", String::as_str);
            (0, format!("GPU 0 ({name}; {why}, so index 0 is assumed)"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_absent_library_is_a_reason_not_a_panic() {
        let Err(why) = Nvml::load_from("libtokenmeter-no-such-nvml.so.1") else { panic!("loaded a missing library") };
        assert!(why.contains("libtokenmeter-no-such-nvml.so.1"), "{why}");
    }

    #[test]
    fn the_adapters_gpu_is_found_by_name_else_gpu_0_and_it_says_so() {
        let names = ["NVIDIA A10".to_string(), "NVIDIA H200".to_string()];
        assert_eq!(choose(&names, "NVIDIA H200").0, 1);
        let (index, how) = choose(&names, "llvmpipe (LLVM 19.1.1, 256 bits)");
        assert_eq!(index, 0);
        assert!(how.contains("index 0 is assumed"), "{how}");
        let twins = ["NVIDIA H200".to_string(), "NVIDIA H200".to_string()];
        assert!(choose(&twins, "NVIDIA H200").1.contains("2 NVML GPUs"));
    }
}
