// Loaded before the page paints (not deferred): the theme chosen with the header's toggle
// ("light" or "dark", kept in localStorage; none: follow the system's prefers-color-scheme).
"use strict";
(function () {
  const theme = localStorage.getItem("fai-theme");
  if (theme === "light" || theme === "dark") document.documentElement.dataset.theme = theme;
})();
