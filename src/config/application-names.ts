import { ApplicationDirectory } from '../applications/application-directory.js';
import { projectApplicationId } from '../applications/application-ids.js';

/**
 * The names of the applications, of the config and of the portal API, for the access log and the admin
 * API. The project's own
 * key is the application `project`; an identity that is its own name (an LDAP DN, a plugin's caller) is
 * shown as it is.
 */
export class ApplicationNames {
  private readonly names: ReadonlyMap<string, string>;

  constructor(
    applications: ReadonlyArray<{ id: string; name: string }>,
    /** The applications made through the portal API. */
    private readonly made: ApplicationDirectory = new ApplicationDirectory(),
  ) {
    this.names = new Map([
      [projectApplicationId, projectApplicationId],
      ...applications.map(({ id, name }): [string, string] => [id.toLowerCase(), name]),
    ]);
  }

  nameOf(id: string): string {
    return this.names.get(id.toLowerCase()) ?? this.made.nameOf(id) ?? id;
  }
}
