//! Local model files: from the file picker (a folder, or several files) or dropped on the page
//! (folders are walked with the File and Directory Entries API). Either way the result is a
//! [`BlobStore`] of the files the loader can use, chosen by [`sources::pick_model_files`].

use crate::model::source::{js_message, BlobStore};
use crate::web::sources::{self, PickedFiles};
use crate::{Error, Result};
use wasm_bindgen::closure::Closure;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

/// Folders deeper than this under a dropped one are not walked (a model folder is flat).
const MAX_DEPTH: usize = 3;

/// (path as shown, file) → the store the loader opens, and how the files were matched.
pub fn store(files: Vec<(String, web_sys::File)>) -> Result<(BlobStore, PickedFiles)> {
    let paths: Vec<String> = files.iter().map(|(p, _)| p.clone()).collect();
    let picked = sources::pick_model_files(&paths)?;
    let mut store = BlobStore { label: picked.label.clone(), ..BlobStore::default() };
    for (name, i) in &picked.files {
        store.files.insert(name.clone(), files[*i].1.clone().into());
    }
    Ok((store, picked))
}

/// The files of an `<input type=file>`, with their folder when a folder was picked.
pub fn from_input(input: &web_sys::HtmlInputElement) -> Vec<(String, web_sys::File)> {
    let Some(list) = input.files() else { return Vec::new() };
    (0..list.length())
        .filter_map(|i| list.get(i))
        .map(|f| {
            let relative = js_sys::Reflect::get(&f, &"webkitRelativePath".into()).ok().and_then(|v| v.as_string());
            (relative.filter(|r| !r.is_empty()).unwrap_or_else(|| f.name()), f)
        })
        .collect()
}

/// The entries of a drop, taken while the event is being handled (they are gone afterwards).
pub fn drop_entries(event: &web_sys::DragEvent) -> (Vec<web_sys::FileSystemEntry>, Vec<web_sys::File>) {
    let Some(data) = event.data_transfer() else { return (Vec::new(), Vec::new()) };
    let items = data.items();
    let entries: Vec<_> = (0..items.length())
        .filter_map(|i| items.get(i))
        .filter_map(|item| item.webkit_get_as_entry().ok().flatten())
        .collect();
    let files = data.files().map(|list| (0..list.length()).filter_map(|i| list.get(i)).collect()).unwrap_or_default();
    (entries, files)
}

/// Walks dropped entries: files as they are, folders recursively (paths keep the folder name).
pub async fn walk(entries: Vec<web_sys::FileSystemEntry>) -> Result<Vec<(String, web_sys::File)>> {
    let mut out = Vec::new();
    let mut pending: Vec<(web_sys::FileSystemEntry, usize)> = entries.into_iter().map(|e| (e, 0)).collect();
    while let Some((entry, depth)) = pending.pop() {
        let path = entry.full_path().trim_start_matches('/').to_string();
        if entry.is_file() {
            let file = entry_file(entry.unchecked_into()).await?;
            out.push((path, file));
        } else if entry.is_directory() && depth < MAX_DEPTH {
            let directory: web_sys::FileSystemDirectoryEntry = entry.unchecked_into();
            for child in read_directory(&directory).await? {
                pending.push((child, depth + 1));
            }
        }
    }
    Ok(out)
}

fn drop_error(e: JsValue) -> Error {
    Error::Io { path: "dropped files".into(), message: js_message(&e) }
}

/// Awaits a callback-style API: `call(resolve, reject)`.
async fn callback_promise(call: impl FnOnce(&js_sys::Function, &js_sys::Function)) -> Result<JsValue> {
    let mut call = Some(call);
    let promise = js_sys::Promise::new(&mut |resolve, reject| {
        if let Some(call) = call.take() {
            call(&resolve, &reject);
        }
    });
    JsFuture::from(promise).await.map_err(drop_error)
}

async fn entry_file(entry: web_sys::FileSystemFileEntry) -> Result<web_sys::File> {
    let file = callback_promise(|resolve, reject| {
        let ok = Closure::once_into_js({
            let resolve = resolve.clone();
            move |file: JsValue| {
                let _ = resolve.call1(&JsValue::NULL, &file);
            }
        });
        let fail = Closure::once_into_js({
            let reject = reject.clone();
            move |e: JsValue| {
                let _ = reject.call1(&JsValue::NULL, &e);
            }
        });
        entry.file_with_callback_and_callback(ok.unchecked_ref(), fail.unchecked_ref());
    })
    .await?;
    Ok(file.unchecked_into())
}

/// Every entry of a folder (`readEntries` returns them in batches until an empty one).
async fn read_directory(directory: &web_sys::FileSystemDirectoryEntry) -> Result<Vec<web_sys::FileSystemEntry>> {
    let reader = directory.create_reader();
    let mut all = Vec::new();
    loop {
        let batch = callback_promise(|resolve, reject| {
            let ok = Closure::once_into_js({
                let resolve = resolve.clone();
                move |entries: JsValue| {
                    let _ = resolve.call1(&JsValue::NULL, &entries);
                }
            });
            let fail = Closure::once_into_js({
                let reject = reject.clone();
                move |e: JsValue| {
                    let _ = reject.call1(&JsValue::NULL, &e);
                }
            });
            let _ = reader.read_entries_with_callback_and_callback(ok.unchecked_ref(), fail.unchecked_ref());
        })
        .await?;
        let batch = js_sys::Array::from(&batch);
        if batch.length() == 0 {
            return Ok(all);
        }
        all.extend(batch.iter().map(|e| e.unchecked_into::<web_sys::FileSystemEntry>()));
    }
}
