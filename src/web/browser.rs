//! Small wrappers over the browser APIs the page uses: fetch, the URL's query string,
//! localStorage and file downloads. Failures come back as `Result`, never as panics.

use crate::{Error, Result};
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;

fn window() -> Result<web_sys::Window> {
    web_sys::window().ok_or_else(|| Error::Invalid("no window".into()))
}

fn js_error(what: &str) -> impl Fn(JsValue) -> Error + '_ {
    move |e| Error::Invalid(format!("{what}: {e:?}"))
}

/// Fetches a file (from the page's scope or the engine worker's: relative URLs are the scope's).
pub async fn fetch_bytes(url: &str) -> Result<Vec<u8>> {
    let io = |e: JsValue| Error::Io { path: url.into(), message: format!("{e:?}") };
    let fetch = crate::remote::browser::scope_fetch(url, &web_sys::RequestInit::new())
        .map_err(|message| Error::Io { path: url.into(), message })?;
    let response: web_sys::Response = JsFuture::from(fetch).await.map_err(io)?.unchecked_into();
    if !response.ok() {
        return Err(Error::Io { path: url.into(), message: format!("HTTP {}", response.status()) });
    }
    let buffer = JsFuture::from(response.array_buffer().map_err(io)?).await.map_err(io)?;
    Ok(js_sys::Uint8Array::new(&buffer).to_vec())
}

/// One value of the page's query string (`?rate=4&…`).
pub fn query_param(key: &str) -> Option<String> {
    let search = window().ok()?.location().search().ok()?;
    web_sys::UrlSearchParams::new_with_str(&search).ok()?.get(key)
}

/// Rewrites the query string in place (no navigation, no history entry).
pub fn replace_query(pairs: &[(&str, String)]) -> Result<()> {
    let params = web_sys::UrlSearchParams::new().map_err(js_error("URLSearchParams"))?;
    for (key, value) in pairs {
        params.append(key, value);
    }
    let query = String::from(params.to_string());
    let window = window()?;
    let path = window.location().pathname().map_err(js_error("location"))?;
    let url = if query.is_empty() { path } else { format!("{path}?{query}") };
    window
        .history()
        .map_err(js_error("history"))?
        .replace_state_with_url(&JsValue::NULL, "", Some(&url))
        .map_err(js_error("history"))
}

fn local_storage() -> Result<web_sys::Storage> {
    window()?.local_storage().map_err(js_error("localStorage"))?.ok_or_else(|| Error::Invalid("no localStorage".into()))
}

pub fn storage_get(key: &str) -> Option<String> {
    local_storage().ok()?.get_item(key).ok()?
}

/// Fails when the storage is full (the quota is a few MB) or disabled.
pub fn storage_set(key: &str, value: &str) -> Result<()> {
    local_storage()?.set_item(key, value).map_err(js_error("localStorage is full or disabled"))
}

/// Saves `contents` as a file through a Blob and a temporary object URL.
pub fn download(file_name: &str, mime: &str, contents: &str) -> Result<()> {
    let parts = js_sys::Array::of1(&JsValue::from_str(contents));
    let options = web_sys::BlobPropertyBag::new();
    options.set_type(mime);
    let blob = web_sys::Blob::new_with_str_sequence_and_options(&parts, &options).map_err(js_error("Blob"))?;
    let url = web_sys::Url::create_object_url_with_blob(&blob).map_err(js_error("object URL"))?;
    let document = window()?.document().ok_or_else(|| Error::Invalid("no document".into()))?;
    let anchor: web_sys::HtmlAnchorElement =
        document.create_element("a").map_err(js_error("download link"))?.unchecked_into();
    anchor.set_href(&url);
    anchor.set_download(file_name);
    anchor.click();
    // The click has started the download; the URL is no longer needed.
    web_sys::Url::revoke_object_url(&url).map_err(js_error("object URL"))
}

/// Milliseconds since the epoch.
pub fn now_ms() -> f64 {
    js_sys::Date::now()
}

/// "2026-11-29 10:47" in the browser's time zone.
pub fn local_time(epoch_ms: f64) -> String {
    let d = js_sys::Date::new(&JsValue::from_f64(epoch_ms));
    format!(
        "{}-{:02}-{:02} {:02}:{:02}",
        d.get_full_year(),
        d.get_month() + 1,
        d.get_date(),
        d.get_hours(),
        d.get_minutes()
    )
}

/// Watches the main thread for long tasks (over 50 ms: `PerformanceObserver`, entry type
/// `longtask`, which Chromium has and Firefox and Safari lack) from `start` until `finish`.
pub struct LongTaskWatch {
    observer: web_sys::PerformanceObserver,
    started_ms: f64,
    seen: std::rc::Rc<std::cell::RefCell<crate::bench::LongTasks>>,
    _callback: wasm_bindgen::closure::Closure<dyn FnMut(web_sys::PerformanceObserverEntryList)>,
}

impl LongTaskWatch {
    /// `None` where the browser does not report long tasks.
    pub fn start() -> Option<LongTaskWatch> {
        let class = js_sys::Reflect::get(&js_sys::global(), &"PerformanceObserver".into()).ok()?;
        let supported: js_sys::Array =
            js_sys::Reflect::get(&class, &"supportedEntryTypes".into()).ok()?.dyn_into().ok()?;
        if !supported.includes(&"longtask".into(), 0) {
            return None;
        }
        let seen = std::rc::Rc::new(std::cell::RefCell::new(crate::bench::LongTasks::default()));
        let into = seen.clone();
        let started_ms = crate::clock::now_s() * 1000.0; // performance.now(), as entries' start times
        let callback = wasm_bindgen::closure::Closure::<dyn FnMut(web_sys::PerformanceObserverEntryList)>::new(
            move |list: web_sys::PerformanceObserverEntryList| {
                tally(&mut into.borrow_mut(), started_ms, list.get_entries());
            },
        );
        let observer = web_sys::PerformanceObserver::new(callback.as_ref().unchecked_ref()).ok()?;
        let types = js_sys::Array::of1(&"longtask".into());
        observer.observe(&web_sys::PerformanceObserverInit::new(&types));
        Some(LongTaskWatch { observer, started_ms, seen, _callback: callback })
    }

    /// What was seen, including entries not yet delivered to the callback.
    pub fn finish(self) -> crate::bench::LongTasks {
        let mut seen = self.seen.borrow().clone();
        tally(&mut seen, self.started_ms, self.observer.take_records());
        self.observer.disconnect();
        seen
    }
}

fn tally(seen: &mut crate::bench::LongTasks, started_ms: f64, entries: js_sys::Array) {
    for entry in entries.iter() {
        let entry = entry.unchecked_into::<web_sys::PerformanceEntry>();
        let ms = entry.duration();
        if seen.tasks.len() < crate::bench::LongTasks::KEPT {
            seen.tasks.push(((entry.start_time() - started_ms) / 1000.0, ms));
        }
        seen.count += 1;
        seen.longest_ms = seen.longest_ms.max(ms);
        seen.total_ms += ms;
    }
}

/// Watches the browser's conditions during one rate's run (see `bench::record::conditions`): the
/// tab's visibility, the window's focus, a heartbeat timer on the main thread (its late ticks),
/// the battery where `navigator.getBattery` exists; the page adds a lost device.
pub struct ConditionWatch {
    started_s: f64,
    seen: std::rc::Rc<std::cell::RefCell<ConditionsSeen>>,
    heartbeat: (i32, wasm_bindgen::closure::Closure<dyn FnMut()>),
    listeners: Vec<Listener>,
}

/// An event listener added to a target, removed at `finish`.
type Listener = (web_sys::EventTarget, &'static str, wasm_bindgen::closure::Closure<dyn FnMut()>);

#[derive(Default)]
struct ConditionsSeen {
    conditions: crate::bench::record::conditions::Conditions,
    /// (due, fired) of each heartbeat tick later than the bound.
    late_ticks: Vec<(f64, f64)>,
    last_tick_s: f64,
    /// The battery's listener, once `getBattery` answered (removed at `finish`).
    battery: Option<(web_sys::EventTarget, wasm_bindgen::closure::Closure<dyn FnMut()>)>,
    finished: bool,
}

/// Late ticks kept: a hidden tab's 1 s cadence for almost three hours.
const LATE_TICKS_KEPT: usize = 10_000;

impl ConditionWatch {
    /// `None` without a window (never on the page).
    pub fn start() -> Option<ConditionWatch> {
        use crate::bench::record::conditions::{ConditionEvent, Conditions, HEARTBEAT_MS, LATE_BOUND_MS};
        use wasm_bindgen::closure::Closure;
        let window = web_sys::window()?;
        let document = window.document()?;
        let started_s = crate::clock::now_s();
        let seen = std::rc::Rc::new(std::cell::RefCell::new(ConditionsSeen {
            conditions: Conditions::new(),
            ..ConditionsSeen::default()
        }));
        if document.hidden() {
            seen.borrow_mut().conditions.events.push(ConditionEvent::Hidden { at_s: 0.0 });
        }
        let at = move || crate::clock::now_s() - started_s;
        let mut listeners = Vec::new();
        let mut listen =
            |target: web_sys::EventTarget, name: &'static str, event: fn(&web_sys::Document, f64) -> ConditionEvent| {
                let (into, document) = (seen.clone(), document.clone());
                let callback = Closure::<dyn FnMut()>::new(move || {
                    into.borrow_mut().conditions.events.push(event(&document, at()));
                });
                target.add_event_listener_with_callback(name, callback.as_ref().unchecked_ref()).ok()?;
                listeners.push((target, name, callback));
                Some(())
            };
        listen(document.clone().into(), "visibilitychange", |d, at_s| {
            if d.hidden() {
                ConditionEvent::Hidden { at_s }
            } else {
                ConditionEvent::Visible { at_s }
            }
        })?;
        listen(window.clone().into(), "blur", |_, at_s| ConditionEvent::Blurred { at_s })?;
        listen(window.clone().into(), "focus", |_, at_s| ConditionEvent::Focused { at_s })?;
        let into = seen.clone();
        let tick = Closure::<dyn FnMut()>::new(move || {
            let mut s = into.borrow_mut();
            let (due_s, fired_s) = (s.last_tick_s + HEARTBEAT_MS / 1000.0, at());
            if fired_s - due_s > LATE_BOUND_MS / 1000.0 && s.late_ticks.len() < LATE_TICKS_KEPT {
                s.late_ticks.push((due_s, fired_s));
            }
            s.last_tick_s = fired_s;
        });
        let heartbeat = window
            .set_interval_with_callback_and_timeout_and_arguments_0(tick.as_ref().unchecked_ref(), HEARTBEAT_MS as i32)
            .ok()?;
        watch_battery(&window, seen.clone(), at);
        Some(ConditionWatch { started_s, seen, heartbeat: (heartbeat, tick), listeners })
    }

    /// The engine's device was lost meanwhile.
    pub fn device_lost(&self, reason: String) {
        let at_s = crate::clock::now_s() - self.started_s;
        let event = crate::bench::record::conditions::ConditionEvent::DeviceLost { at_s, reason };
        self.seen.borrow_mut().conditions.events.push(event);
    }

    /// What was seen, the watch stopped. A late tick that one of the page's own `long_tasks`
    /// (`(start, ms)`, as `LongTasks::tasks` keeps them) explains is not throttling.
    pub fn finish(self, long_tasks: &[(f64, f64)]) -> crate::bench::record::conditions::Conditions {
        if let Some(window) = web_sys::window() {
            window.clear_interval_with_handle(self.heartbeat.0);
        }
        for (target, name, callback) in &self.listeners {
            let _ = target.remove_event_listener_with_callback(name, callback.as_ref().unchecked_ref());
        }
        let mut seen = self.seen.borrow_mut();
        seen.finished = true;
        if let Some((battery, callback)) = seen.battery.take() {
            for name in ["chargingchange", "levelchange"] {
                let _ = battery.remove_event_listener_with_callback(name, callback.as_ref().unchecked_ref());
            }
        }
        let mut conditions = std::mem::take(&mut seen.conditions);
        conditions.until_s = crate::clock::now_s() - self.started_s;
        conditions.add_late_ticks(&seen.late_ticks, long_tasks);
        conditions
    }
}

/// Records the power source and charge now and at each change, where `navigator.getBattery`
/// exists (Chromium; not Firefox or Safari).
fn watch_battery(
    window: &web_sys::Window,
    seen: std::rc::Rc<std::cell::RefCell<ConditionsSeen>>,
    at: impl Fn() -> f64 + 'static,
) {
    let navigator = window.navigator();
    let Ok(get) = js_sys::Reflect::get(&navigator, &"getBattery".into()) else { return };
    let Some(get) = get.dyn_ref::<js_sys::Function>() else { return };
    let Ok(promise) = get.call0(&navigator).and_then(|p| p.dyn_into::<js_sys::Promise>()) else {
        return;
    };
    wasm_bindgen_futures::spawn_local(async move {
        let Ok(battery) = JsFuture::from(promise).await else { return };
        let read = std::rc::Rc::new(move |battery: &JsValue| {
            let field = |name: &str| js_sys::Reflect::get(battery, &name.into()).ok();
            let charging = field("charging")?.as_bool()?;
            let level = field("level")?.as_f64().filter(|l| l.is_finite())?;
            Some(crate::bench::record::conditions::ConditionEvent::Power { at_s: at(), charging, level })
        });
        if seen.borrow().finished {
            return;
        }
        seen.borrow_mut().conditions.events.extend(read(&battery));
        let (into, target) = (seen.clone(), battery.clone());
        let callback = wasm_bindgen::closure::Closure::<dyn FnMut()>::new(move || {
            let event = read(&target);
            into.borrow_mut().conditions.events.extend(event);
        });
        let battery: web_sys::EventTarget = battery.unchecked_into();
        for name in ["chargingchange", "levelchange"] {
            let _ = battery.add_event_listener_with_callback(name, callback.as_ref().unchecked_ref());
        }
        seen.borrow_mut().battery = Some((battery, callback));
    });
}
