//! Where a model's bytes come from: a folder on disk (CLI), files picked in the browser, or memory
//! (embedded fixtures, tests). Files are read by range so a checkpoint is never held whole in memory.

use crate::error::{Error, Result};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Random access to one file.
#[allow(async_fn_in_trait)] // wasm futures are not Send; nothing here needs them to be
pub trait ByteSource {
    fn len(&self) -> u64;
    async fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>>;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A model folder: `config.json`, `tokenizer.json`, `*.safetensors`, `model.safetensors.index.json`.
#[allow(async_fn_in_trait)]
pub trait ModelStore {
    type File: ByteSource;
    /// Where the files are, for messages.
    fn location(&self) -> String;
    /// `None` when the folder has no such file.
    async fn open(&self, name: &str) -> Result<Option<Self::File>>;

    /// The whole file, when it is at most `max_bytes` (checked from its size before reading;
    /// the caps are in [`crate::limits`]).
    async fn read_all(&self, name: &str, max_bytes: u64) -> Result<Option<Vec<u8>>> {
        match self.open(name).await? {
            Some(f) => {
                crate::limits::file_size(name, f.len(), max_bytes)?;
                Ok(Some(f.read(0, f.len() as usize).await?))
            }
            None => Ok(None),
        }
    }
}

/// Files held in memory (tests, embedded models).
#[derive(Clone, Default)]
pub struct MemStore {
    pub files: BTreeMap<String, Arc<Vec<u8>>>,
    pub label: String,
}

impl MemStore {
    pub fn new(label: &str) -> Self {
        MemStore { files: BTreeMap::new(), label: label.into() }
    }
    pub fn with(mut self, name: &str, bytes: Vec<u8>) -> Self {
        self.files.insert(name.into(), Arc::new(bytes));
        self
    }
}

#[derive(Clone)]
pub struct MemFile(pub Arc<Vec<u8>>);

impl ByteSource for MemFile {
    fn len(&self) -> u64 {
        self.0.len() as u64
    }
    async fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        let start = offset as usize;
        self.0
            .get(start..start + len)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| Error::Io { path: "memory".into(), message: "read past the end".into() })
    }
}

impl ModelStore for MemStore {
    type File = MemFile;
    fn location(&self) -> String {
        self.label.clone()
    }
    async fn open(&self, name: &str) -> Result<Option<MemFile>> {
        Ok(self.files.get(name).map(|b| MemFile(b.clone())))
    }
}

#[cfg(not(target_arch = "wasm32"))]
pub use native::{DirStore, DiskFile};

#[cfg(not(target_arch = "wasm32"))]
mod native {
    use super::*;
    use std::os::unix::fs::FileExt;
    use std::path::PathBuf;

    /// A model folder on disk.
    pub struct DirStore {
        pub dir: PathBuf,
    }

    impl DirStore {
        pub fn new(dir: impl Into<PathBuf>) -> Result<Self> {
            let dir = dir.into();
            let shown = dir.display().to_string();
            match std::fs::metadata(&dir) {
                Ok(m) if m.is_dir() => Ok(DirStore { dir }),
                Ok(_) => Err(Error::Invalid(format!("{shown}: not a folder (pass the folder holding config.json)"))),
                Err(_) => Err(Error::NotFound { path: shown }),
            }
        }
    }

    pub struct DiskFile {
        file: std::fs::File,
        len: u64,
        path: String,
    }

    impl ByteSource for DiskFile {
        fn len(&self) -> u64 {
            self.len
        }
        async fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            let mut buf = vec![0u8; len];
            self.file
                .read_exact_at(&mut buf, offset)
                .map_err(|e| Error::Io { path: self.path.clone(), message: e.to_string() })?;
            Ok(buf)
        }
    }

    impl ModelStore for DirStore {
        type File = DiskFile;
        fn location(&self) -> String {
            self.dir.display().to_string()
        }
        async fn open(&self, name: &str) -> Result<Option<DiskFile>> {
            let path = self.dir.join(name);
            let shown = path.display().to_string();
            // Checked before opening: opening a FIFO waits for a writer, and a device never ends.
            match crate::limits::regular_file_len(&path) {
                Err(Error::NotFound { .. }) => return Ok(None),
                Err(e) => return Err(e),
                Ok(_) => {}
            }
            match std::fs::File::open(&path) {
                Ok(file) => {
                    let len =
                        file.metadata().map_err(|e| Error::Io { path: shown.clone(), message: e.to_string() })?.len();
                    Ok(Some(DiskFile { file, len, path: shown }))
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(Error::Io { path: shown, message: e.to_string() }),
            }
        }
    }
}

#[cfg(target_arch = "wasm32")]
pub use browser::{js_message, BlobFile, BlobStore};

#[cfg(target_arch = "wasm32")]
mod browser {
    use super::*;
    use wasm_bindgen::{JsCast, JsValue};
    use wasm_bindgen_futures::JsFuture;

    /// A browser exception's message (`TypeError: Failed to fetch` → "Failed to fetch").
    pub fn js_message(value: &JsValue) -> String {
        if let Some(e) = value.dyn_ref::<js_sys::Error>() {
            return String::from(e.message());
        }
        value.as_string().unwrap_or_else(|| format!("{value:?}"))
    }

    /// Files the page holds as Blobs: picked or dropped `File`s, or responses kept in the Cache
    /// Storage. Nothing is read until the loader asks for a range.
    #[derive(Clone, Default)]
    pub struct BlobStore {
        pub files: BTreeMap<String, web_sys::Blob>,
        pub label: String,
    }

    #[derive(Clone)]
    pub struct BlobFile {
        blob: web_sys::Blob,
        name: String,
    }

    impl BlobFile {
        pub fn new(blob: web_sys::Blob, name: &str) -> BlobFile {
            BlobFile { blob, name: name.into() }
        }
    }

    impl ByteSource for BlobFile {
        fn len(&self) -> u64 {
            self.blob.size() as u64
        }
        async fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
            let io = |message: String| Error::Io { path: self.name.clone(), message };
            let end = offset + len as u64;
            if end > self.len() {
                return Err(io("read past the end".into()));
            }
            let part = self.blob.slice_with_f64_and_f64(offset as f64, end as f64).map_err(|e| io(js_message(&e)))?;
            let buffer = JsFuture::from(part.array_buffer()).await.map_err(|e| io(js_message(&e)))?;
            Ok(js_sys::Uint8Array::new(&buffer).to_vec())
        }
    }

    impl ModelStore for BlobStore {
        type File = BlobFile;
        fn location(&self) -> String {
            self.label.clone()
        }
        async fn open(&self, name: &str) -> Result<Option<BlobFile>> {
            Ok(self.files.get(name).map(|b| BlobFile::new(b.clone(), name)))
        }
    }
}
