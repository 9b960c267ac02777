//! The worker's end of the crossing: its global scope, and [`post`], which sends a [`FromEngine`]
//! update to the page (the loader and the entry's handlers all answer through it).

use crate::web::protocol::{self, FromEngine};
use wasm_bindgen::JsCast;

pub(super) fn scope() -> web_sys::DedicatedWorkerGlobalScope {
    js_sys::global().unchecked_into()
}

/// Sends `message` to the page.
pub fn post(message: &FromEngine) {
    let envelope = js_sys::Object::new();
    let _ = js_sys::Reflect::set(&envelope, &"json".into(), &protocol::encode(message).into());
    // Fails only when the page is gone: nobody is left to tell.
    let _ = scope().post_message(&envelope);
}
