/**
 * Where the appliance plugs in the upload of an update bundle from the console (Certificate and
 * settings page, `POST /console/update`). Elsewhere there is no installer: the page shows no upload
 * form and the route answers 404. The route has already checked the session, the form token and
 * the origin before it hands the request over; the body is the browser's multipart/form-data
 * upload (field `bundle`), unread, for the installer to stream to disk rather than hold in memory.
 */
export interface UpdateInstaller {
  /** One line for the page: what an upload does here. */
  readonly description: string;
  /** Takes the uploaded bundle; resolves with what the page tells the technician. */
  install(request: Request): Promise<{ ok: boolean; message: string }>;
}

/** The installer of this system; the appliance's build provides one, every other build none. */
export function updateInstaller(): UpdateInstaller | undefined {
  return undefined;
}
