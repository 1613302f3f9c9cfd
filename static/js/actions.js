// Page actions that used to be inline handlers, which the Content-Security-Policy forbids:
// <form data-confirm="Question?"> asks before it is sent; <button data-print> prints the page.
document.addEventListener("submit", function (event) {
  var question = event.target.getAttribute && event.target.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
  }
});
document.addEventListener("click", function (event) {
  if (event.target.closest && event.target.closest("[data-print]")) {
    window.print();
  }
});
