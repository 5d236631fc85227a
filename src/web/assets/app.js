// resq web — the only script: live counters and the per-second graph on the overview (polls
// the JSON endpoint named by #live's data-src), a confirmation for forms that ask for one
// (data-confirm), and short filter URLs (empty fields left out). Pages work without it.
(function () {
  "use strict";

  document.addEventListener("submit", function (e) {
    var form = e.target;
    var q = form && form.getAttribute && form.getAttribute("data-confirm");
    if (q && !window.confirm(q)) {
      e.preventDefault();
      return;
    }
    // A filter form leaves its empty fields out of the URL, so the view's address is short
    // enough to bookmark and share.
    if (form && form.method === "get") {
      var inputs = form.querySelectorAll("input, select");
      for (var i = 0; i < inputs.length; i++) {
        if (inputs[i].name && inputs[i].value === "") {
          inputs[i].disabled = true;
        }
      }
    }
  });

  function fmt(n) {
    return Math.round(n).toLocaleString("en-US").replace(/,/g, "\u202f");
  }

  function rate(n) {
    return n >= 10 ? fmt(n) : (Math.round(n * 10) / 10).toString();
  }

  function start() {
    var live = document.getElementById("live");
    if (!live) {
      return;
    }
    // Resolved against the page without the user:password@ a browser may show in it (fetch
    // refuses URLs with credentials; the browser still sends the ones it has for this origin).
    var url = new URL(live.getAttribute("data-src"), window.location.href);
    url.username = "";
    url.password = "";
    var src = url.href;
    var every = parseInt(live.getAttribute("data-every") || "2000", 10);
    var keep = 90;
    var prev = null;
    var series = { p: [], f: [] };
    var svg = document.getElementById("live-chart");
    var status = live.querySelector("[data-live-status]");

    function set(sel, text) {
      var els = live.querySelectorAll(sel);
      for (var i = 0; i < els.length; i++) {
        els[i].textContent = text;
      }
    }

    function draw() {
      if (!svg) {
        return;
      }
      var max = 1;
      series.p.concat(series.f).forEach(function (v) {
        if (v > max) {
          max = v;
        }
      });
      var w = 600, h = 100;
      ["p", "f"].forEach(function (k) {
        var line = svg.querySelector("polyline." + k);
        var pts = series[k].map(function (v, i) {
          var x = w - (series[k].length - 1 - i) * (w / (keep - 1));
          var y = h - (v / max) * (h - 4) - 2;
          return x.toFixed(1) + "," + y.toFixed(1);
        });
        line.setAttribute("points", pts.join(" "));
      });
      set("[data-live-peak]", rate(max));
    }

    function poll() {
      fetch(src, { credentials: "same-origin", cache: "no-store" })
        .then(function (r) {
          if (!r.ok) {
            throw new Error("HTTP " + r.status);
          }
          return r.json();
        })
        .then(function (d) {
          set('[data-live="processed"]', fmt(d.processed));
          set('[data-live="failed"]', fmt(d.failed));
          set('[data-live="failed_entries"]', fmt(d.failed_entries));
          if (prev && d.t > prev.t) {
            var dt = (d.t - prev.t) / 1000;
            var p = Math.max(0, d.processed - prev.processed) / dt;
            var f = Math.max(0, d.failed - prev.failed) / dt;
            series.p.push(p);
            series.f.push(f);
            if (series.p.length > keep) {
              series.p.shift();
              series.f.shift();
            }
            set('[data-rate="processed"]', rate(p));
            set('[data-rate="failed"]', rate(f));
            draw();
          }
          prev = d;
          if (status) {
            status.textContent = "live";
          }
        })
        .catch(function (err) {
          if (status) {
            status.textContent = "live updates paused (" + err.message + ")";
          }
        })
        .then(function () {
          window.setTimeout(poll, every);
        });
    }

    poll();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
