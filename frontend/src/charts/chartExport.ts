/** A chart's data as CSV (what the chart draws from, before smoothing), and downloads. */

import type { Series } from "./series";

/** A number as the API writes it: "NaN", "Infinity", "-Infinity"; empty when missing. */
export function csvNumber(value: number | null | undefined): string {
  if (value === null || value === undefined) return "";
  if (Number.isNaN(value)) return "NaN";
  if (value === Infinity) return "Infinity";
  if (value === -Infinity) return "-Infinity";
  return String(value);
}

/** A text cell, quoted when it holds a comma, a quote or a line break (RFC 4180). */
export function csvText(text: string): string {
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

/** One metric of one run: `step,wall_time,value,min,max`, a row per point. */
export function seriesCsv(series: Series): string {
  const lines = ["step,wall_time,value,min,max"];
  series.step.forEach((step, i) => {
    lines.push(
      [
        String(step),
        csvNumber(series.wall[i]),
        csvNumber(series.value[i]),
        csvNumber(series.min[i]),
        csvNumber(series.max[i]),
      ].join(","),
    );
  });
  return `${lines.join("\n")}\n`;
}

/** One metric of several runs, long format: `run_id,run,step,wall_time,value`. */
export function compareCsv(runs: readonly { id: string; name: string; series: Series }[]): string {
  const lines = ["run_id,run,step,wall_time,value"];
  for (const { id, name, series } of runs) {
    series.step.forEach((step, i) => {
      lines.push(
        [
          csvText(id),
          csvText(name),
          String(step),
          csvNumber(series.wall[i]),
          csvNumber(series.value[i]),
        ].join(","),
      );
    });
  }
  return `${lines.join("\n")}\n`;
}

/** A file name part from a metric key (`eval/episode_reward` → `eval-episode_reward`). */
export function fileSafe(text: string): string {
  return text.replace(/[^A-Za-z0-9._-]+/g, "-").replace(/^-+|-+$/g, "") || "chart";
}

export function downloadBlob(blob: Blob, filename: string): void {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = filename;
  link.hidden = true;
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
