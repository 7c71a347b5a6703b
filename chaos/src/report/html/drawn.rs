//! The page's one inline script: once the browser has laid the figure out, it measures what
//! was actually drawn and writes it as JSON into `<pre id="drawn" hidden>`, so a headless
//! browser's `--dump-dom` can tell that the charts and markers are on screen, not only in
//! the markup. It reads the page and writes into it, nothing else: no network, no timers.
//!
//! The JSON: `series` by name (`elements`, `drawn`: those with a non-empty box on screen,
//! and their `width` in SVG units); `markers` in the page's order (`label`, whether its `line` and `text` are drawn, its
//! `x`, and `online`: the players-online line's y at its last data point before the marker
//! (the level before the action, whatever the sampling's phase), its lowest point (largest
//! y) before the next marker, and its y just before that marker, in SVG units); `bands`:
//! per service, the states of its drawn bands in time order.

/// The element the script writes into, then the script.
pub const SCRIPT: &str = r#"<pre id="drawn" hidden></pre>
<script>
(function () {
  "use strict";
  var out = {series: {}, markers: [], bands: {}};
  var svg = document.querySelector("svg.figure");
  function drawn(el) {
    var r = el ? el.getBoundingClientRect() : null;
    return r && (r.width > 0 || r.height > 0) ? r : null;
  }
  if (svg) {
    svg.querySelectorAll("[data-series]").forEach(function (el) {
      var name = el.getAttribute("data-series");
      var s = out.series[name] || (out.series[name] = {elements: 0, drawn: 0, width: 0});
      var r = drawn(el);
      s.elements += 1;
      if (r) { s.drawn += 1; s.width += el.getBBox().width; }
    });
    var online = svg.querySelector('path[data-series="online"]');
    var points = [];
    if (online) {
      for (var l = 0, n = online.getTotalLength(); l <= n; l += 0.5) {
        points.push(online.getPointAtLength(l));
      }
    }
    // The line's data points, from its `d` ("M x y L x y …").
    var vertices = [];
    if (online) {
      var re = /[ML]\s*(-?[\d.]+)[ ,](-?[\d.]+)/g, m;
      while ((m = re.exec(online.getAttribute("d"))) !== null) {
        vertices.push({x: parseFloat(m[1]), y: parseFloat(m[2])});
      }
    }
    var yBefore = function (x) {
      var best = null;
      vertices.forEach(function (v) { if (v.x < x) { best = v; } });
      return best && best.y;
    };
    var markers = Array.prototype.slice.call(svg.querySelectorAll("g.marker"));
    var xs = markers.map(function (g) { return g.querySelector("line").x1.baseVal.value; });
    markers.forEach(function (g, i) {
      var x = xs[i];
      var next = xs.filter(function (v) { return v > x; }).reduce(function (a, b) { return Math.min(a, b); }, Infinity);
      var lowest = null, last = null;
      points.forEach(function (p) {
        if (p.x >= x && p.x < next) {
          lowest = lowest === null ? p.y : Math.max(lowest, p.y);
          if (last === null || p.x >= last.x) { last = p; }
        }
      });
      out.markers.push({
        label: g.querySelector("text").textContent,
        line: !!drawn(g.querySelector("line")),
        text: !!drawn(g.querySelector("text")),
        x: x,
        online: points.length ? {before: yBefore(x), lowest: lowest, before_next: last && last.y} : null
      });
    });
    svg.querySelectorAll("rect[data-service]").forEach(function (el) {
      var service = el.getAttribute("data-service");
      if (drawn(el)) { (out.bands[service] = out.bands[service] || []).push(el.getAttribute("data-state")); }
    });
  }
  document.getElementById("drawn").textContent = JSON.stringify(out);
})();
</script>
"#;
