/** The dashboard's entry point: routes, and the access page on any 401. */

import "./styles.css";
import "./editing.css";
import "./sweeps.css";
import "./network.css";
import "./recordings.css";

import { onUnauthorized } from "./api/http";
import { h } from "./dom";
import { setNavigator } from "./nav";
import { Router } from "./router";
import { renderAccessPage } from "./views/accessPage";
import { compareView } from "./views/compareView";
import { runFormView } from "./views/runForm";
import { runPageView } from "./views/runPage";
import { runsListView } from "./views/runsList";
import { sweepFormView } from "./views/sweepForm";
import { sweepPageView } from "./views/sweepPage";
import { sweepsListView } from "./views/sweepsList";

const main = document.getElementById("main") as HTMLElement;

const router = new Router(main, (box) => {
  box.append(
    h(
      "section",
      null,
      h("h1", null, "Not found"),
      h("p", null, "Nothing here. ", h("a", { href: "/" }, "Back to the runs.")),
    ),
  );
});
router
  .add("/", runsListView)
  .add("/runs/new", runFormView)
  .add("/runs/:id", runPageView)
  .add("/compare", compareView)
  .add("/sweeps", sweepsListView)
  .add("/sweeps/new", sweepFormView)
  .add("/sweeps/:id", sweepPageView);
setNavigator((url) => router.navigate(url));

onUnauthorized(() => {
  if (main.querySelector(".access-page")) return;
  router.leave();
  renderAccessPage(main);
});

router.start();
