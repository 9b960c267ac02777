//! Models fetched from a URL or the Hugging Face Hub, kept in the browser's Cache Storage so a
//! reload loads them without the network. [`RemoteStore`] is a `ModelStore`: the loader
//! (`Checkpoint::open`) asks for the files it needs, and each is downloaded once — streamed, with
//! progress and an abort signal — then read by range from the cache. Sizes and files the server
//! does not have are remembered in localStorage, so a cached model opens offline too.

use super::protocol::{DownloadProgress, Manifest};
use super::sources::{self, CachedModel};
use crate::clock::now_s;
use crate::model::safetensors::HeaderWatch;
use crate::model::source::{js_message, BlobFile};
use crate::model::ModelStore;
use crate::{Error, Result};
use std::cell::{Cell, RefCell};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// The Cache Storage cache holding model files, by URL.
pub const CACHE_NAME: &str = "tokenmeter-models-v1";
const MANIFEST_KEY: &str = "tokenmeter-model-cache";

/// The model cache's record ([`Manifest`]), as the page keeps it in localStorage (a worker has
/// none: the page sends it with a load, and keeps what the worker's [`RemoteStore`] reports back).
pub fn load_manifest() -> Manifest {
    super::browser::storage_get(MANIFEST_KEY).and_then(|s| serde_json::from_str(&s).ok()).unwrap_or_default()
}

pub fn save_manifest(manifest: &Manifest) {
    // Without it the model still loads from the cache; only sizes and offline opening suffer.
    let _ = super::browser::storage_set(MANIFEST_KEY, &serde_json::to_string(manifest).unwrap_or_default());
}

/// Forgets every file of the folder `base`.
fn forget(manifest: &mut Manifest, base: &str) {
    manifest.sizes.retain(|url, _| sources::url_folder(url) != base);
    manifest.missing.retain(|url| sources::url_folder(url) != base);
}

fn io(path: &str) -> impl Fn(JsValue) -> Error + '_ {
    move |e| Error::Io { path: path.into(), message: js_message(&e) }
}

/// The Cache Storage of the global scope (the page's or its engine worker's: the same storage).
async fn open_cache() -> Result<web_sys::Cache> {
    open_named(CACHE_NAME).await
}

async fn open_named(name: &str) -> Result<web_sys::Cache> {
    let unavailable = |why: String| Error::Invalid(format!("Cache Storage unavailable: {why}"));
    let caches = js_sys::Reflect::get(&js_sys::global(), &"caches".into()).map_err(|e| unavailable(js_message(&e)))?;
    let caches: web_sys::CacheStorage =
        caches.dyn_into().map_err(|_| unavailable("this page is not served over https or localhost".into()))?;
    let cache = JsFuture::from(caches.open(name)).await.map_err(io("Cache Storage"))?;
    Ok(cache.unchecked_into())
}

/// The Cache Storage cache holding the engine's kernel trials (`engine::trial`), by key: the
/// worker has no localStorage, and this storage outlives the page as the models do.
const TRIALS_CACHE: &str = "tokenmeter-kernel-trials-v1";

/// A trial's entry: a URL that names it and is never fetched.
fn trial_url(key: &str) -> String {
    format!("https://tokenmeter.invalid/kernel-trial/{}", String::from(js_sys::encode_uri_component(key)))
}

/// The trial kept under `key`, if there is one (a storage that cannot be read has none).
pub async fn kept_trial(key: &str) -> Option<crate::engine::trial::Trial> {
    let cache = open_named(TRIALS_CACHE).await.ok()?;
    let found = JsFuture::from(cache.match_with_str(&trial_url(key))).await.ok()?;
    let response: web_sys::Response = found.dyn_into().ok()?;
    let text = JsFuture::from(response.text().ok()?).await.ok()?.as_string()?;
    serde_json::from_str(&text).ok()
}

/// Keeps `trial` under its key for later loads.
pub async fn keep_trial(trial: &crate::engine::trial::Trial) -> Result<()> {
    let cache = open_named(TRIALS_CACHE).await?;
    let url = trial_url(&trial.key);
    let text = serde_json::to_string(trial).expect("serialisable");
    let response = web_sys::Response::new_with_opt_str(Some(&text)).map_err(io(&url))?;
    JsFuture::from(cache.put_with_str(&url, &response)).await.map_err(io(&url))?;
    Ok(())
}

/// The page's own URL (empty outside a window).
pub fn page_url() -> String {
    web_sys::window().and_then(|w| w.location().href().ok()).unwrap_or_default()
}

/// `url` made absolute against the page at `page` (empty: `url` must be absolute already), as the
/// cache keys it.
pub fn absolute(url: &str, page: &str) -> Result<String> {
    let parsed = if page.is_empty() { web_sys::Url::new(url) } else { web_sys::Url::new_with_base(url, page) };
    parsed.map(|u| u.href()).map_err(|_| Error::Invalid(format!("{url:?} is not a valid URL")))
}

async fn cached_blob(cache: &web_sys::Cache, url: &str) -> Result<Option<web_sys::Blob>> {
    let found = JsFuture::from(cache.match_with_str(url)).await.map_err(io(url))?;
    if found.is_undefined() {
        return Ok(None);
    }
    let response: web_sys::Response = found.unchecked_into();
    let blob = JsFuture::from(response.blob().map_err(io(url))?).await.map_err(io(url))?;
    Ok(Some(blob.unchecked_into()))
}

/// Puts `bytes` in the cache under `url` (tests, and files that do not come from fetch).
pub async fn put_bytes(url: &str, bytes: &[u8]) -> Result<()> {
    let cache = open_cache().await?;
    let mut copy = bytes.to_vec();
    let response = web_sys::Response::new_with_opt_u8_array(Some(&mut copy)).map_err(io(url))?;
    JsFuture::from(cache.put_with_str(url, &response)).await.map_err(io(url))?;
    let mut manifest = load_manifest();
    manifest.sizes.insert(url.to_string(), bytes.len() as u64);
    save_manifest(&manifest);
    Ok(())
}

/// Every model folder in the cache, with its size.
pub async fn list() -> Result<Vec<CachedModel>> {
    let cache = open_cache().await?;
    let keys = JsFuture::from(cache.keys()).await.map_err(io("Cache Storage"))?;
    let urls: Vec<String> =
        js_sys::Array::from(&keys).iter().map(|r| r.unchecked_into::<web_sys::Request>().url()).collect();
    Ok(sources::group_cached(&urls, &load_manifest().sizes))
}

/// Deletes every cached file of the folder `base`.
pub async fn delete(base: &str) -> Result<()> {
    let cache = open_cache().await?;
    let keys = JsFuture::from(cache.keys()).await.map_err(io("Cache Storage"))?;
    for request in js_sys::Array::from(&keys).iter() {
        let url = request.unchecked_into::<web_sys::Request>().url();
        if sources::url_folder(&url) == base {
            JsFuture::from(cache.delete_with_str(&url)).await.map_err(io(&url))?;
        }
    }
    let mut manifest = load_manifest();
    forget(&mut manifest, base);
    save_manifest(&manifest);
    Ok(())
}

/// A model folder behind a URL, downloaded into the cache as the loader asks for files.
pub struct RemoteStore {
    /// Absolute folder URL, ending in `/`.
    pub base: String,
    cache: web_sys::Cache,
    abort: web_sys::AbortSignal,
    events: StoreEvents,
    started_s: f64,
    /// Bytes downloaded by this store (not counting files found in the cache).
    downloaded: Cell<u64>,
    /// Seconds spent downloading (range checks included), and the bytes of the files found in
    /// the cache without a download: a load's time to ready (`bench::record::ready`).
    download_s: Cell<f64>,
    stored: Cell<u64>,
    manifest: RefCell<Manifest>,
}

/// What a [`RemoteStore`] reports: download progress, and its changed manifest (for the page to
/// keep: the store may run in a worker, which has no localStorage).
pub struct StoreEvents {
    pub on_progress: Box<dyn Fn(&DownloadProgress)>,
    pub on_manifest: Box<dyn Fn(&Manifest)>,
}

impl StoreEvents {
    /// On the page: no progress shown, the manifest saved in place.
    pub fn saving() -> StoreEvents {
        StoreEvents { on_progress: Box::new(|_| {}), on_manifest: Box::new(save_manifest) }
    }
}

impl RemoteStore {
    /// `base` as [`sources::remote_base`] gives it, made absolute ([`absolute`]); `manifest`: the
    /// cache's record as the page has it.
    pub async fn new(
        base: &str,
        abort: web_sys::AbortSignal,
        manifest: Manifest,
        events: StoreEvents,
    ) -> Result<RemoteStore> {
        Ok(RemoteStore {
            base: absolute(base, "")?,
            cache: open_cache().await?,
            abort,
            events,
            started_s: now_s(),
            downloaded: Cell::new(0),
            download_s: Cell::new(0.0),
            stored: Cell::new(0),
            manifest: RefCell::new(manifest),
        })
    }

    /// Bytes fetched from the network so far (0 when everything came from the cache).
    pub fn downloaded(&self) -> u64 {
        self.downloaded.get()
    }

    /// Seconds spent downloading so far.
    pub fn download_s(&self) -> f64 {
        self.download_s.get()
    }

    /// Bytes of the files this store found in the cache (none downloaded by it).
    pub fn stored(&self) -> u64 {
        self.stored.get()
    }

    /// Streams `url` into the cache; `None` when the server has no such file (HTTP 404). A
    /// `.safetensors` file's header is checked first by two range requests (its length, then the
    /// header), so a file that is not one is refused before its data is fetched; servers without
    /// ranges send the whole file, whose header is then checked as its first bytes arrive (the
    /// download stops there when it is bad).
    async fn download(&self, url: &str, name: &str) -> Result<Option<()>> {
        let safetensors = name.ends_with(".safetensors");
        if safetensors {
            match self.check_header_by_range(url, name).await? {
                Precheck::Missing => return Ok(None),
                // Checked again on the stream below: cheap, and the file may have changed.
                Precheck::Checked | Precheck::NoRanges => {}
            }
        }
        // Aborted by the user's Cancel, or here when the header turns out bad (which also stops
        // the cache's copy of the body).
        let own = web_sys::AbortController::new().map_err(io(url))?;
        let signal = web_sys::AbortSignal::any(&js_sys::Array::of2(&self.abort, &own.signal()));
        let init = web_sys::RequestInit::new();
        init.set_signal(Some(&signal));
        let fetch = crate::remote::browser::scope_fetch(url, &init)
            .map_err(|message| Error::Io { path: url.into(), message })?;
        let fetched = JsFuture::from(fetch).await;
        let response: web_sys::Response = match fetched {
            Ok(r) => r.unchecked_into(),
            Err(_) if self.abort.aborted() => return Err(Error::Cancelled),
            Err(e) => return Err(Error::Io { path: url.into(), message: js_message(&e) }),
        };
        match response.status() {
            404 => return Ok(None),
            401 | 403 => {
                return Err(Error::Io {
                    path: url.into(),
                    message: format!("HTTP {} (a gated or private repository needs a login)", response.status()),
                })
            }
            s if !response.ok() => return Err(Error::Io { path: url.into(), message: format!("HTTP {s}") }),
            _ => {}
        }
        let total = response.headers().get("content-length").ok().flatten().and_then(|v| v.parse::<u64>().ok());
        // One copy of the body goes into the cache, the other is read here to count bytes.
        let copy = response.clone().map_err(io(url))?;
        let put = JsFuture::from(self.cache.put_with_str(url, &copy));
        let watch = safetensors.then(|| HeaderWatch::new(name, total));
        let counted = self.count(response, url, name, total, watch).await;
        if counted.is_err() {
            own.abort();
        }
        let stored = put.await;
        if self.abort.aborted() {
            return Err(Error::Cancelled);
        }
        let bytes = counted?;
        stored.map_err(io(url))?;
        let mut manifest = self.manifest.borrow_mut();
        manifest.sizes.insert(url.to_string(), bytes);
        manifest.missing.remove(url);
        (self.events.on_manifest)(&manifest);
        Ok(Some(()))
    }

    async fn count(
        &self,
        response: web_sys::Response,
        url: &str,
        name: &str,
        total: Option<u64>,
        mut watch: Option<HeaderWatch>,
    ) -> Result<u64> {
        let body = response.body().ok_or_else(|| Error::Io { path: url.into(), message: "empty response".into() })?;
        let reader: web_sys::ReadableStreamDefaultReader = body.get_reader().unchecked_into();
        let mut bytes = 0u64;
        let mut shown_s = 0.0;
        loop {
            let chunk = JsFuture::from(reader.read()).await.map_err(|e| {
                if self.abort.aborted() {
                    Error::Cancelled
                } else {
                    Error::Io { path: url.into(), message: js_message(&e) }
                }
            })?;
            let done = js_sys::Reflect::get(&chunk, &"done".into()).map(|d| d.is_truthy()).unwrap_or(true);
            if done {
                break;
            }
            let value = js_sys::Reflect::get(&chunk, &"value".into()).map_err(io(url))?;
            let chunk: js_sys::Uint8Array = value.unchecked_into();
            if let Some(watch) = watch.as_mut().filter(|w| !w.checked()) {
                watch.feed(&chunk.to_vec())?;
            }
            let n = chunk.length() as u64;
            bytes += n;
            self.downloaded.set(self.downloaded.get() + n);
            // A few updates a second are plenty for a progress bar.
            if now_s() - shown_s > 0.1 || Some(bytes) == total {
                shown_s = now_s();
                (self.events.on_progress)(&DownloadProgress {
                    file: name.into(),
                    file_bytes: bytes,
                    file_total: total,
                    bytes: self.downloaded.get(),
                    elapsed_s: now_s() - self.started_s,
                });
            }
        }
        if let Some(watch) = &watch {
            watch.finish()?;
        }
        Ok(bytes)
    }

    /// Bytes `first..=last` of `url`, with the file's size from `Content-Range`.
    async fn fetch_range(&self, url: &str, first: u64, last: u64) -> Result<RangeAnswer> {
        let headers = web_sys::Headers::new().map_err(io(url))?;
        headers.set("Range", &format!("bytes={first}-{last}")).map_err(io(url))?;
        let init = web_sys::RequestInit::new();
        init.set_signal(Some(&self.abort));
        init.set_headers(&headers);
        let fetch = crate::remote::browser::scope_fetch(url, &init)
            .map_err(|message| Error::Io { path: url.into(), message })?;
        let response: web_sys::Response = match JsFuture::from(fetch).await {
            Ok(r) => r.unchecked_into(),
            Err(_) if self.abort.aborted() => return Err(Error::Cancelled),
            Err(e) => return Err(Error::Io { path: url.into(), message: js_message(&e) }),
        };
        match response.status() {
            206 => {}
            404 => return Ok(RangeAnswer::Missing),
            _ if response.ok() => {
                // The whole file, unasked: leave its body unread.
                if let Some(body) = response.body() {
                    let _ = body.cancel();
                }
                return Ok(RangeAnswer::Unsupported);
            }
            s => return Err(Error::Io { path: url.into(), message: format!("HTTP {s}") }),
        }
        let size = response.headers().get("content-range").ok().flatten().and_then(|r| content_range_size(&r));
        let buffer = JsFuture::from(response.array_buffer().map_err(io(url))?).await.map_err(io(url))?;
        let mut bytes = js_sys::Uint8Array::new(&buffer).to_vec();
        bytes.truncate((last - first + 1) as usize);
        Ok(RangeAnswer::Part(bytes, size))
    }

    /// The safetensors header of `url` read by range and parsed, before any of the data is.
    async fn check_header_by_range(&self, url: &str, name: &str) -> Result<Precheck> {
        let (first8, size) = match self.fetch_range(url, 0, 7).await? {
            RangeAnswer::Part(bytes, size) => (bytes, size),
            RangeAnswer::Missing => return Ok(Precheck::Missing),
            RangeAnswer::Unsupported => return Ok(Precheck::NoRanges),
        };
        let mut watch = HeaderWatch::new(name, size);
        watch.feed(&first8)?;
        if first8.len() < 8 {
            watch.finish()?;
        }
        // Checked against the limit by `feed`, and not 0 (an empty header does not parse).
        let n = u64::from_le_bytes(first8[..8].try_into().expect("8 bytes"));
        if !watch.checked() {
            match self.fetch_range(url, 8, 8 + n - 1).await? {
                RangeAnswer::Part(header, _) => watch.feed(&header)?,
                RangeAnswer::Missing | RangeAnswer::Unsupported => return Ok(Precheck::NoRanges),
            }
            watch.finish()?;
        }
        Ok(Precheck::Checked)
    }
}

enum RangeAnswer {
    /// A 206: the bytes, and the file's size when `Content-Range` gives it.
    Part(Vec<u8>, Option<u64>),
    Missing,
    /// The server ignores ranges (it answered with the whole file).
    Unsupported,
}

enum Precheck {
    Checked,
    Missing,
    NoRanges,
}

/// The size in `Content-Range: bytes 0-7/1234` (none for `*`).
fn content_range_size(value: &str) -> Option<u64> {
    value.trim().strip_prefix("bytes ")?.split_once('/')?.1.trim().parse().ok()
}

impl ModelStore for RemoteStore {
    type File = BlobFile;
    fn location(&self) -> String {
        self.base.clone()
    }
    async fn open(&self, name: &str) -> Result<Option<BlobFile>> {
        let url = format!("{}{name}", self.base);
        if let Some(blob) = cached_blob(&self.cache, &url).await? {
            self.stored.set(self.stored.get() + blob.size() as u64);
            return Ok(Some(BlobFile::new(blob, name)));
        }
        if self.manifest.borrow().missing.contains(&url) {
            return Ok(None);
        }
        let from_s = now_s();
        let downloaded = self.download(&url, name).await;
        self.download_s.set(self.download_s.get() + now_s() - from_s);
        if downloaded?.is_none() {
            let mut manifest = self.manifest.borrow_mut();
            manifest.missing.insert(url);
            (self.events.on_manifest)(&manifest);
            return Ok(None);
        }
        let blob = cached_blob(&self.cache, &url)
            .await?
            .ok_or_else(|| Error::Io { path: url.clone(), message: "not kept by the Cache Storage".into() })?;
        Ok(Some(BlobFile::new(blob, name)))
    }
}
