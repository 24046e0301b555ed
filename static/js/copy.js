// A "Copy" button: <button type="button" data-copy="#element-id"> copies that element's text to the
// clipboard and says so on the button. No inline script: the CSP forbids it.
(function () {
  "use strict";

  document.addEventListener("click", function (event) {
    var button = event.target.closest("[data-copy]");
    if (!button) return;
    var source = document.querySelector(button.getAttribute("data-copy"));
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent.trim()).then(function () {
      button.textContent = "Copied";
      button.setAttribute("aria-live", "polite");
    }, function () {
      button.textContent = "Copy failed: select the text";
    });
  });
})();
