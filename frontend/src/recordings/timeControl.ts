/** The recording's time control: env 0's video (when recorded) and a step slider, both
 * bound to the shared cursor: playing or scrubbing the video moves it, and a move from
 * elsewhere (a heatmap, the slider) seeks the video. */

import { formatNumber } from "../api/numbers";
import { h } from "../dom";
import { frameAt, timeOfFrame, type Cursor } from "./cursor";

export interface VideoSource {
  url: string;
  fps: number;
  frames: number;
}

export interface TimeControl {
  element: HTMLElement;
  /** Shows or hides the video (it shows env 0 only). */
  showVideo(shown: boolean): void;
  destroy(): void;
}

export function createTimeControl(cursor: Cursor, source: VideoSource | null): TimeControl {
  const slider = h("input", {
    id: "rec-step",
    type: "range",
    min: 0,
    max: cursor.length - 1,
    step: 1,
    props: { value: String(cursor.step) },
  });
  const readout = h("output", { for: "rec-step", class: "rec-step-readout", "aria-live": "off" });
  const video = source
    ? h("video", {
        class: "video-player rec-video",
        controls: true,
        muted: true,
        playsinline: true,
        preload: "auto",
        src: source.url,
      })
    : null;
  const show = (step: number): void => {
    slider.value = String(step);
    slider.setAttribute("aria-valuetext", `step ${step}`);
    readout.textContent = `step ${formatNumber(step)} of ${formatNumber(cursor.length)}`;
  };
  slider.addEventListener("input", () => cursor.set(Number(slider.value), slider));

  let frameLoop = 0;
  const fromVideo = (): void => {
    if (video && source) cursor.set(frameAt(video.currentTime, source.fps, source.frames), video);
  };
  const follow = (): void => {
    fromVideo();
    if (video && !video.paused) frameLoop = requestAnimationFrame(follow);
  };
  if (video) {
    video.addEventListener("timeupdate", fromVideo);
    video.addEventListener("seeked", fromVideo);
    video.addEventListener("play", () => (frameLoop = requestAnimationFrame(follow)));
    video.addEventListener("pause", () => cancelAnimationFrame(frameLoop));
  }
  const stop = cursor.subscribe((step, from) => {
    show(step);
    if (!video || !source || from === video) return;
    if (frameAt(video.currentTime, source.fps, source.frames) !== step)
      video.currentTime = timeOfFrame(step, source.fps);
  });
  show(cursor.step);

  const element = h(
    "div",
    { class: "rec-time" },
    video,
    h("div", { class: "field rec-step-field" }, h("label", { for: "rec-step" }, "Step"), slider, readout),
  );
  return {
    element,
    showVideo: (shown) => {
      if (!video) return;
      video.hidden = !shown;
      if (!shown) video.pause();
    },
    destroy: () => {
      stop();
      cancelAnimationFrame(frameLoop);
      video?.pause();
    },
  };
}
