// Draw every chart of a page or of a swapped fragment: <div data-figure="ID"> takes its
// figure from the <script type="application/json" id="ID"> that json_script wrote.
(function () {
  function draw(root) {
    root.querySelectorAll("[data-figure]").forEach(function (div) {
      var source = document.getElementById(div.dataset.figure);
      if (!source) return;
      var figure = JSON.parse(source.textContent);
      Plotly.react(div, figure.data, figure.layout, {displaylogo: false, responsive: true});
      div.dataset.drawn = "1";
    });
  }
  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function (event) { draw(event.detail.elt); });
})();
