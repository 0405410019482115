"use strict";
(function () {
  var list = document.getElementById("episodes");
  if (!list) { return; }
  var items = Array.prototype.slice.call(list.querySelectorAll(".episode"));
  var texts = items.map(function (el) { return el.textContent.toLowerCase(); });
  var conditions = items.map(function (el) { return JSON.parse(el.getAttribute("data-condition") || "{}"); });
  var form = document.getElementById("episode-filters");
  var search = document.getElementById("episode-search");
  var count = document.getElementById("episode-count");
  var controls = Array.prototype.slice.call(form.querySelectorAll("[data-filter]"));

  function apply() {
    var query = search.value.trim().toLowerCase();
    var shown = 0;
    items.forEach(function (el, i) {
      var keep = !query || texts[i].indexOf(query) !== -1;
      controls.forEach(function (control) {
        if (!keep) { return; }
        var kind = control.getAttribute("data-filter");
        if (kind === "embedded") {
          keep = !control.checked || el.getAttribute("data-embedded") === "yes";
        } else if (control.value !== "") {
          var actual = kind === "condition" ? conditions[i][control.getAttribute("data-key")] : el.getAttribute("data-" + kind);
          keep = actual === control.value;
        }
      });
      el.hidden = !keep;
      if (keep) { shown += 1; }
    });
    count.textContent = shown + " of " + items.length + " episodes";
  }

  form.addEventListener("submit", function (event) { event.preventDefault(); });
  form.addEventListener("input", apply);
  form.addEventListener("change", apply);
  document.getElementById("episode-reset").addEventListener("click", function () {
    search.value = "";
    controls.forEach(function (control) { if (control.type === "checkbox") { control.checked = false; } else { control.value = ""; } });
    apply();
  });
  var target = window.location.hash && document.getElementById(window.location.hash.slice(1));
  if (target && target.tagName === "DETAILS") { target.open = true; }
  apply();
})();
