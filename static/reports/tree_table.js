// Tree tables (the budget review): rows carry their budget's path in data-path, parents come
// before their children. A parent's twisty folds its subtree; a column header sorts the
// budgets under each parent by that column, so that the tree stays a tree (subtotals stay
// above what they sum). Listeners sit on the document: htmx swaps the table for another
// period, and the new one works the same.
(function () {
  function rows(table) {
    return Array.prototype.slice.call(table.tBodies[0].rows);
  }

  function parentPath(path) {
    var cut = path.lastIndexOf("/");
    return cut < 0 ? null : path.slice(0, cut);
  }

  // A row is shown when no budget above it in the table is folded.
  function refresh(table) {
    var folded = {};
    rows(table).forEach(function (row) {
      var twisty = row.querySelector("button.twisty");
      if (twisty && twisty.getAttribute("aria-expanded") === "false") {
        folded[row.dataset.path] = true;
      }
    });
    rows(table).forEach(function (row) {
      var above = parentPath(row.dataset.path);
      var hidden = false;
      while (above !== null && !hidden) {
        hidden = folded[above] === true;
        above = parentPath(above);
      }
      row.hidden = hidden;
    });
  }

  function fold(twisty, folded) {
    var name = twisty.getAttribute("aria-label").replace(/^(Fold|Unfold) /, "");
    twisty.setAttribute("aria-expanded", folded ? "false" : "true");
    twisty.setAttribute("aria-label", (folded ? "Unfold " : "Fold ") + name);
  }

  function value(row, column, numeric) {
    var text = row.cells[column].textContent.trim();
    if (!numeric) {
      return text.toLowerCase();
    }
    var number = parseFloat(text.replace(/,/g, ""));
    return isNaN(number) ? null : number;
  }

  // Siblings ordered by the column (a missing value last, whichever the direction), each
  // followed by its own subtree.
  function sort(table, column, numeric, descending) {
    var all = rows(table);
    var byPath = {};
    all.forEach(function (row) { byPath[row.dataset.path] = {row: row, children: []}; });
    var roots = [];
    all.forEach(function (row) {
      var parent = byPath[parentPath(row.dataset.path)];
      (parent ? parent.children : roots).push(byPath[row.dataset.path]);
    });
    function compare(a, b) {
      var x = value(a.row, column, numeric);
      var y = value(b.row, column, numeric);
      if (x === y) { return 0; }
      if (x === null) { return 1; }
      if (y === null) { return -1; }
      return (x < y ? -1 : 1) * (descending ? -1 : 1);
    }
    var body = table.tBodies[0];
    (function place(nodes) {
      nodes.slice().sort(compare).forEach(function (node) {
        body.appendChild(node.row);
        place(node.children);
      });
    })(roots);
  }

  function prepare(table) {
    if (table.dataset.ready) {
      return;
    }
    table.dataset.ready = "1";
    // A budget whose children the viewer may not see has nothing to fold.
    rows(table).forEach(function (row) {
      var twisty = row.querySelector("button.twisty");
      var prefix = row.dataset.path + "/";
      var hasChildren = rows(table).some(function (other) {
        return other.dataset.path.indexOf(prefix) === 0;
      });
      if (twisty && !hasChildren) {
        var space = document.createElement("span");
        space.className = "twisty";
        twisty.replaceWith(space);
      }
    });
  }

  function prepareAll() {
    document.querySelectorAll(".tree-table").forEach(prepare);
  }
  document.addEventListener("DOMContentLoaded", prepareAll);
  document.addEventListener("htmx:afterSettle", prepareAll);

  document.addEventListener("click", function (event) {
    var target = event.target.closest ? event.target : null;
    if (!target) {
      return;
    }
    var twisty = target.closest(".tree-table button.twisty");
    if (twisty) {
      var table = twisty.closest("table");
      fold(twisty, twisty.getAttribute("aria-expanded") === "true");
      refresh(table);
      return;
    }
    var header = target.closest(".tree-table th button.sort");
    if (header) {
      var th = header.closest("th");
      var sorted = th.closest("table");
      var descending = th.getAttribute("aria-sort") === "ascending";
      Array.prototype.forEach.call(th.parentNode.cells, function (cell) {
        cell.removeAttribute("aria-sort");
      });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      sort(sorted, th.cellIndex, th.hasAttribute("data-numeric"), descending);
      return;
    }
    var all = target.closest("[data-fold]");
    if (all) {
      var report = all.closest("section").querySelector(".tree-table");
      if (!report) {
        return;
      }
      var shown = {};
      rows(report).forEach(function (row) { shown[row.dataset.path] = true; });
      report.querySelectorAll("button.twisty").forEach(function (each) {
        // "Fold all" keeps the tops of the tree open: their children are the first level.
        var top = !shown[parentPath(each.closest("tr").dataset.path)];
        fold(each, all.dataset.fold === "all" && !top);
      });
      refresh(report);
    }
  });
})();
