//! The edit form of a draft's page.
//!
//! A browser rewrites what it puts in a form: an `<input>` drops line breaks, a textarea drops
//! the line feed right after its opening tag, the HTML parser turns CR into LF and NUL into
//! U+FFFD. Posting every field back would rewrite values nobody touched, so the script sends
//! only the fields the person changed, and a value the form cannot carry faithfully is not
//! offered for editing at all.

use countersign_canon::Manifest;
use countersign_gate::Draft;
use maud::{Markup, html};

use crate::markup::hidden_mark;

/// One leaf's field in the edit form. A value holding characters a person cannot see is not
/// offered for editing: in an input the browser would show them raw (a right-to-left override
/// reorders what is read) and rewrite some (CR, NUL), so it is shown escaped with its flags
/// instead. A value with line feeds gets a textarea, with the line feed HTML drops after the
/// opening tag put back first, so a leading line feed survives.
fn edit_field(pointer: &str, e: &countersign_canon::Entry<'_>) -> Option<Markup> {
    let value = match serde_json::from_str::<serde_json::Value>(e.value) {
        Ok(serde_json::Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => return None,
    };
    if e.flags.any() {
        let flags: Vec<&str> = e.flags.names().collect();
        return Some(html! {
            span.fixed {
                code { (e.shown()) } " "
                span.warn {
                    "not editable here: it holds characters a person cannot see ("
                    (flags.join(", ")) ")"
                }
            }
        });
    }
    Some(if e.kind == "string" && value.contains('\n') {
        html! { textarea data-pointer=(pointer) data-type="string" { "\n" (value) } }
    } else {
        html! { input data-pointer=(pointer) data-type=(e.kind) value=(value); }
    })
}

/// The edit form: one field per string, number or boolean leaf of the arguments; the script
/// sends back only the fields the person changed.
pub(crate) fn edit_form(d: &Draft, m: &Manifest) -> Markup {
    let mut fields = Vec::new();
    m.for_each(|e| {
        let Some(pointer) = e.pointer.strip_prefix("/args") else {
            return;
        };
        if pointer.is_empty() || !matches!(e.kind, "string" | "number" | "boolean") {
            return;
        }
        let Some(field) = edit_field(pointer, e) else {
            return;
        };
        fields.push(html! {
            label { span { code { (e.shown_pointer) } (hidden_mark(e.hidden)) } (field) }
        });
    });
    html! {
        form id="edit" data-expected=(d.revision().to_hex()) {
            h3 { "Edit" }
            p {
                "Your edit becomes a new revision, shown again before anyone signs it. Only the \
                 fields you change are sent; every other value stays byte for byte."
            }
            @for f in fields { (f) }
            button type="submit" id="save" { "Save as a new revision" }
        }
    }
}
