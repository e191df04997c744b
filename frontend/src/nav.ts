/** Navigation for code outside the router (after a submit, from a button). */

let navigator: (url: string) => void = (url) => window.location.assign(url);

export function setNavigator(navigate: (url: string) => void): void {
  navigator = navigate;
}

export function navigate(url: string): void {
  navigator(url);
}
