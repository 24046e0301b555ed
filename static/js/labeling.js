// The labeling queue's keyboard: p pass, f fail, s skip, u undo, n note, ? help.
// Each key clicks the matching button, so the keyboard does exactly what the mouse does (and htmx
// sends it); the page works without this file. No inline script: the CSP forbids it.
(function () {
  "use strict";

  var KEYS = { p: "p", f: "f", s: "s", u: "u" };

  function typingIn(element) {
    if (!element) return false;
    var tag = element.tagName;
    return tag === "TEXTAREA" || tag === "INPUT" || tag === "SELECT" || element.isContentEditable;
  }

  function helpDialog() {
    return document.getElementById("queue-help");
  }

  document.addEventListener("keydown", function (event) {
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    var help = helpDialog();
    if (typingIn(document.activeElement)) {
      // Esc leaves the note so that the next key is a verdict again.
      if (event.key === "Escape") document.activeElement.blur();
      return;
    }
    if (event.key === "?") {
      if (!help) return;
      event.preventDefault();
      if (help.open) help.close(); else help.showModal();
      return;
    }
    if (help && help.open) return;
    var panel = document.getElementById("queue-case");
    if (!panel || event.repeat) return;  // holding a key down must not label several cases
    if (event.key === "n") {
      var note = panel.querySelector('[data-key="n"]');
      if (note) {
        event.preventDefault();
        note.focus();
      }
      return;
    }
    var key = KEYS[event.key];
    if (!key) return;
    // While a request is in flight the panel is busy: hx-sync drops a second one anyway.
    var button = panel.querySelector('[data-key="' + key + '"]');
    if (button && !button.disabled) {
      event.preventDefault();
      button.click();
    }
  });
})();
