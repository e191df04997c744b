/** The PNG and CSV download buttons of a chart card. */

import { downloadBlob, fileSafe } from "../charts/chartExport";
import type { LineChart } from "../charts/lineChart";
import { h } from "../dom";

export function chartDownloads(
  chart: LineChart,
  name: () => string,
  csv: () => string,
  prefix: string,
): HTMLElement {
  const file = (ext: string) => `${fileSafe(prefix)}-${fileSafe(name())}.${ext}`;
  const png = h(
    "button",
    { type: "button", class: "secondary small", "aria-label": "Download as PNG" },
    "PNG",
  );
  png.addEventListener("click", async () => {
    const blob = await chart.toPng(name());
    if (blob) downloadBlob(blob, file("png"));
  });
  const text = h(
    "button",
    { type: "button", class: "secondary small", "aria-label": "Download as CSV" },
    "CSV",
  );
  text.addEventListener("click", () => downloadBlob(new Blob([csv()], { type: "text/csv" }), file("csv")));
  return h("span", { class: "chart-downloads" }, png, text);
}
